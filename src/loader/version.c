/* version.c — which libtern is running (the header's TERN_VERSION says which one a program was built against). */
#include "tern/tern.h"

const char *tern_version(void) { return TERN_VERSION; }
