/* json_schema.h — JSON Schema to a GBNF grammar, for constrained decoding: OpenAI's response_format
 * {"type":"json_schema"} (structured output), {"type":"json_object"}, and forced tool calls, whose arguments Gemma 4
 * writes in its own syntax.
 *
 * The grammar is llama.cpp's GBNF, one rule per line, start rule `root`. Character classes and \xHH / \uHHHH escapes
 * denote Unicode code points (as in llama.cpp; the grammar compiler turns them into UTF-8 byte sequences), and text
 * outside ASCII appears in literals as raw UTF-8. What it emits: "literals" (escapes \n \t \r \\ \" \xHH),
 * [classes] and [^negated classes] (ranges, escapes \n \t \r \\ \xHH \uHHHH, and raw UTF-8 above U+FFFF),
 * ( groups ), alternatives |, postfix * + ? {m} {m,} {m,n} with bounds of at most 1000 (larger ones are split),
 * rule names [A-Za-z0-9-]+, and # comment lines before the first rule (notes on what was not enforced). No empty
 * alternatives, no empty literals, no left recursion, no repetition of something that can match nothing.
 *
 * Supported keywords: type (a name or a list), properties, required, additionalProperties, items, prefixItems,
 * additionalItems, minItems, maxItems, enum, const, anyOf, oneOf, allOf (one schema; several are merged in
 * non-strict mode), $ref to local JSON pointers ("#", "#/$defs/X", "#/definitions/X", any "#/..."; recursion is a
 * rule referring to itself), $defs/definitions, minLength/maxLength (counted in characters), integer minimum,
 * maximum, exclusiveMinimum, exclusiveMaximum (exact digit-range grammars), format (date, time, date-time, uuid,
 * email), pattern (an ECMAScript regex subset: literals, escapes, classes, groups, |, quantifiers, ^ and $ at the
 * ends). Annotations (description, title, default, examples, $schema, $id, $comment, deprecated, readOnly,
 * writeOnly) are ignored. Strict mode (OpenAI's "strict": true) refuses any other keyword and requires
 * additionalProperties false on objects with properties; non-strict mode ignores what it does not know. Errors are
 * TERN_EINVAL and name the JSON path ("schema.properties.age: keyword 'not' is not supported").
 *
 * Objects list their properties in the schema's order (required ones present, optional ones each may be absent),
 * then any additional properties. Whitespace between tokens is bounded (a space, or a newline and up to 20 spaces
 * or tabs), none before the root value or after it. Numbers have at most 19 integral and 18 fractional digits and
 * 3 exponent digits, so every value can end. */
#ifndef TERN_GRAMMAR_JSON_SCHEMA_H
#define TERN_GRAMMAR_JSON_SCHEMA_H

#include <jansson.h>

#include "core/status.h"

typedef enum {
    /* Standard JSON text. */
    TERN_JSON_DIALECT_JSON = 0,
    /* Gemma 4 tool-call arguments, the part between `call:NAME` and `<tool_call|>`: {key:value,...} with bare keys
     * (quoted with <|"|> when a key could not be read back bare), strings delimited by <|"|> holding raw text that
     * never contains <|"|>, numbers, true, false, null bare, arrays [v,v], no whitespace. The root is an object.
     * Additional keys are [A-Za-z0-9_]+; a string with a length bound, a format or a pattern leaves out '<' (so it
     * cannot run into the delimiter), and NUL never appears. */
    TERN_JSON_DIALECT_GEMMA
} tern_json_dialect;

/* GBNF (start rule `root`, malloc'd into *gbnf) accepting the texts valid against `schema` in `dialect`; strict
 * refuses what cannot be enforced exactly. On error *gbnf is NULL. */
TERN_MUST_CHECK tern_err *tern_json_schema_to_gbnf(const json_t *schema, tern_json_dialect dialect, int strict, char **gbnf);
/* GBNF (malloc'd into *gbnf) accepting any JSON object, values of any type nested inside (response_format
 * {"type":"json_object"}). */
TERN_MUST_CHECK tern_err *tern_json_object_gbnf(char **gbnf);

/* Appends raw text as a GBNF literal ("..." with quotes, backslashes and control characters escaped, UTF-8 kept);
 * a failed append sets o->oom. For callers assembling grammars around the converter's (forced tool calls). */
struct sbuf;
void tern_gbnf_literal(struct sbuf *o, const char *s, size_t n);

#endif
