/* ids.h — parsing token id lists given on the command line ("2,105,2364"). */
#ifndef TERN_CLI_IDS_H
#define TERN_CLI_IDS_H

#include <stdint.h>

#include "core/status.h"

/* Parses comma- or space-separated non-negative integers into a malloc'd array (at least one). */
TERN_MUST_CHECK tern_err *tern_parse_ids(const char *s, int32_t **ids, int64_t *n);

#endif
