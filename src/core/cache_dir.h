/* cache_dir.h — the folder for files tern keeps between runs (the packed weights, a tokenizer's tables, choices
 * measured on this CPU): where it is, and how it stays bounded. A file is marked used each time a start reads it;
 * when a new file is written, files not used for TERN_CACHE_MAX_AGE_DAYS and temporary files whose writer has died
 * are removed. Only tern's own kinds of file are ever touched (*.pack, tokenizer-*.tables, cpu-*.stream and their
 * temporaries), so the folder may be shared. */
#ifndef TERN_CORE_CACHE_DIR_H
#define TERN_CORE_CACHE_DIR_H

#include "core/status.h"

#define TERN_CACHE_MAX_AGE_DAYS 30

/* The folder (malloc'd): $TERN_CACHE_DIR, else $XDG_CACHE_HOME/tern, else ~/.cache/tern; NULL when TERN_CACHE_DIR
 * is "" or "off" (caching off) or no folder can be named. Not created. */
char *tern_cache_dir(void);
/* Readies the writing of cache file `path`: creates its folder, and names in tmp (a malloc'd string) the temporary
 * file to write and then rename to `path` — a name pruning can tell from a finished file and trace to its writer
 * (process and machine, so writers in containers sharing the folder never share a temporary). */
TERN_MUST_CHECK tern_err *tern_cache_begin_write(const char *path, char **tmp);
/* Marks a cache file as used now (its modification time), so pruning keeps it; errors are ignored. */
void tern_cache_used(const char *path);
/* Removes tern's cache files in the folder holding `path` (a file of that folder) that were not used for
 * max_age_days, and temporaries whose writing process on this machine is gone (another machine's go by age);
 * errors are ignored. */
void tern_cache_prune(const char *path, double max_age_days);

#endif
