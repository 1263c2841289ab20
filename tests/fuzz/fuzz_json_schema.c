/* fuzz_json_schema.c — fuzz target for the JSON Schema converter: any JSON (a schema from a request) converts or
 * fails cleanly in both dialects and both modes, and every grammar it produces compiles — or is past the
 * compiler's size limits (counts up to a million are honoured exactly, and their expansion can pass them: a clean
 * TERN_EUNSUPPORTED, never a syntax error). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_error_t je;
    json_t *schema = json_loadb((const char *)data, size, JSON_DECODE_ANY, &je);
    if (!schema)
        return 0;
    for (int dialect = 0; dialect < 2; dialect++)
        for (int strict = 0; strict < 2; strict++) {
            char *gbnf = NULL;
            tern_err *err = tern_json_schema_to_gbnf(schema, (tern_json_dialect)dialect, strict, &gbnf);
            if (err) {
                if (gbnf)
                    abort();
                tern_err_free(err);
                continue;
            }
            tern_grammar *g = NULL;
            err = tern_grammar_compile(gbnf, strlen(gbnf), &g);
            if (err && (err->code != TERN_EUNSUPPORTED || g))
                abort(); /* the converter wrote a grammar the compiler refuses */
            tern_err_free(err);
            tern_grammar_free(g);
            free(gbnf);
        }
    json_decref(schema);
    return 0;
}
