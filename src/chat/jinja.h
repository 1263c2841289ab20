/* jinja.h — the Jinja renderer for chat templates.
 *
 * A model's chat template is compiled once into a tern_jinja and rendered for every
 * request with a JSON context (messages, tools, add_generation_prompt, bos_token, ...).
 * The language and its quirks follow @huggingface/jinja, the renderer transformers.js
 * uses, with Hugging Face's settings (trim_blocks and lstrip_blocks on): where that
 * renderer produces output, tern produces the same bytes. Constructs it does not support
 * fail with an error naming the line and column, never with a guessed rendering.
 *
 * Rendering is bounded: nesting depth, evaluation steps, memory and output size are
 * capped (tern_jinja_limits), so a hostile template or context yields an error, not a
 * crash or a hang. A compiled template is immutable: several threads may render it at
 * once.
 *
 * Supported (everything @huggingface/jinja 0.5 supports):
 *  - tags: {{ }}, {% %}, {# #} with "-" whitespace control on either side; trim_blocks,
 *    lstrip_blocks; the transformers {% generation %}/{% endgeneration %} tags (dropped);
 *  - statements: if/elif/else, for (tuple targets, "if" filter, else, loop.index/index0/
 *    revindex/revindex0/first/last/length/previtem/nextitem, break, continue), set (names,
 *    tuples, namespace attributes, {% set x %}...{% endset %}), macro (defaults, varargs,
 *    kwargs), call blocks with caller(args), filter blocks;
 *  - expressions: literals (numbers, strings with escapes, lists, tuples, dicts), + - * /
 *    // % ** ~, comparisons, and/or/not, in/not in, "a if b else c", "a if b", attribute,
 *    subscript and slice access, calls with keyword and * / ** arguments;
 *  - filters: abs, bool, capitalize, default, dictsort, first, float, indent, int, items,
 *    join, last, length, list, lower, map (attribute= or a filter name), reject,
 *    rejectattr, replace, reverse, safe, select, selectattr, sort, string, title, tojson
 *    (indent, ensure_ascii, sort_keys, separators), trim, unique, upper, and dict methods
 *    as filters (keys, values, get);
 *  - tests: boolean, callable, defined, eq/equalto, even, false, integer, iterable, lower,
 *    mapping, none, number, odd, sequence, string, true, undefined, upper;
 *  - methods: str.upper/lower/strip/lstrip/rstrip/title/capitalize/startswith/endswith/
 *    split/replace, str.length; dict.get/items/keys/values/dictsort; list.length;
 *  - globals: namespace(), range(), raise_exception(), strftime_now(), true/false/none
 *    (also True/False/None).
 * Map with a filter name, select and reject go beyond the reference (which throws). Not
 * supported, as in the reference: include/extends/block/raw/with/do, tests with arguments
 * (divisibleby(3)), other filters (e.g. round, sum, format) and Python string methods
 * beyond those listed; each is an error naming its line and column. */
#ifndef TERN_CHAT_JINJA_H
#define TERN_CHAT_JINJA_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct tern_jinja tern_jinja;

/* Bounds on one render; a zero field means "use the default". */
typedef struct tern_jinja_limits {
    size_t max_output;  /* bytes of rendered text, default 64 MiB */
    size_t max_memory;  /* bytes of intermediate values, default 512 MiB */
    uint64_t max_steps; /* evaluation steps (nodes evaluated, loop iterations), default 100 million */
    unsigned max_depth; /* nested evaluation depth (expressions, blocks, macro calls), default 400 */
    int64_t now;        /* what strftime_now() sees, seconds since the epoch; 0 = the current time */
} tern_jinja_limits;

/* Compiles template source `src` (`len` bytes of UTF-8; need not be NUL-terminated). `name`
 * (e.g. the file path, NULL = "template") prefixes error messages, which read
 * "NAME:LINE:COLUMN: reason". On success *out is a template to free with tern_jinja_free. */
TERN_MUST_CHECK tern_err *tern_jinja_compile(const char *src, size_t len, const char *name, tern_jinja **out);

/* Renders `tpl` with the variables of `context` (a JSON object, or NULL for none) into a
 * malloc'd NUL-terminated string *out of *out_len bytes (out_len may be NULL). `limits`
 * may be NULL for the defaults. Errors name the line and column of the failing construct;
 * raise_exception("msg") yields an error whose message ends with msg verbatim. */
TERN_MUST_CHECK tern_err *tern_jinja_render(const tern_jinja *tpl, const json_t *context, const tern_jinja_limits *limits,
                            char **out, size_t *out_len);

/* Frees a compiled template; NULL is fine. */
void tern_jinja_free(tern_jinja *tpl);

/* Finds the chat template of the model in `model_dir`: chat_template.jinja, else the
 * "chat_template" of tokenizer_config.json (a string, or a list of {name, template} from
 * which "default" is taken), else that of chat_template.json. *out is a malloc'd
 * NUL-terminated string of *out_len bytes (out_len may be NULL); *origin (may be NULL)
 * receives a malloc'd description of where it came from ("DIR/chat_template.jinja",
 * "DIR/tokenizer_config.json[chat_template]"), fit to name the template in errors. */
TERN_MUST_CHECK tern_err *tern_chat_template_load(const char *model_dir, char **out, size_t *out_len, char **origin);

#endif
