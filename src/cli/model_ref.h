/* model_ref.h — a verb's MODEL argument given as a name (ORG/NAME[@REVISION][:TAG]) instead of a path: resolved
 * from the Hugging Face cache, fetched first when it is not there (unless HF_HUB_OFFLINE=1). */
#ifndef TERN_CLI_MODEL_REF_H
#define TERN_CLI_MODEL_REF_H

#include "cli/args.h"

/* When pos[0] is not a file or folder but a model name, replaces it with the cached model's path (fetching it if
 * needed, progress on stderr) and sets the verb's "mmproj" option, if it has one and it is unset, to the projector
 * fetched with a GGUF model when that carries an audio tower, and its "alias" option, likewise, to NAME[:TAG]. Returns 0, or 1 after printing "tern VERB: ..." (nothing is there and nothing could be
 * fetched). A path that does not exist and is not a name is left for the verb to report. */
int cli_resolve_model(const char *verb, tern_opt *opts, const char **pos);

#endif
