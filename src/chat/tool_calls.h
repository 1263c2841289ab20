/* tool_calls.h — reading a model's reply back into OpenAI terms: tool-call markup becomes tool calls with JSON
 * arguments, the thinking channel becomes reasoning text, everything else is content. Each model family writes
 * its own markup (a dialect, chosen by the model's chat format):
 *
 *   gemma4       <|channel>thought\n...<channel|>   <|tool_call>call:NAME{ARGS}<tool_call|>   (below)
 *   hermes       <think>...</think>                  <tool_call>{"name": ..., "arguments": {...}}</tool_call>
 *                (Qwen 2.5, Qwen 3, Hermes-style templates)
 *   llama3-json  the whole reply one JSON object {"name": ..., "parameters": {...}}, or one after <|python_tag|>
 *                (Llama 3.1+ with tools)
 *
 * Gemma 4 writes (GEMMA4.md §3):
 *     <|channel>thought\n ...reasoning... <channel|>
 *     <|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3,opts:{metric:true},tags:[<|"|>a<|"|>]}<tool_call|>
 * Strings are quoted with the <|"|> token and hold any bytes verbatim; object keys are bare or quoted the same
 * way; numbers, true/false and null are bare. The parser is incremental: text arrives in arbitrary pieces (one
 * per generated token) and each complete part is reported as soon as it is known, while a piece that might be
 * the start of a marker is held back until the next piece decides it. */
#ifndef TERN_CHAT_TOOL_CALLS_H
#define TERN_CHAT_TOOL_CALLS_H

#include <jansson.h>
#include <stddef.h>

#include "core/status.h"

#define TERN_G4_TOOL_CALL_OPEN "<|tool_call>"
#define TERN_G4_TOOL_CALL_CLOSE "<tool_call|>"
#define TERN_G4_CHANNEL_OPEN "<|channel>"
#define TERN_G4_CHANNEL_CLOSE "<channel|>"
#define TERN_G4_QUOTE "<|\"|>"
#define TERN_G4_TOOL_RESPONSE "<|tool_response>"

typedef enum tern_reply_kind {
    TERN_REPLY_CONTENT = 1, /* visible answer text */
    TERN_REPLY_REASONING,   /* text of the thinking channel */
    TERN_REPLY_TOOL_CALL    /* one complete tool call */
} tern_reply_kind;

/* One piece of a reply, valid during the callback only. Text pieces carry text/len (never empty); a tool call
 * carries the function name and its arguments as a compact JSON object text. */
typedef struct tern_reply_part {
    tern_reply_kind kind;
    const char *text;
    size_t len;
    const char *name;
    const char *arguments;
} tern_reply_part;

/* Receives each part; returns NULL or an error that stops the parser and is passed up. */
typedef tern_err *(*tern_reply_fn)(void *user, const tern_reply_part *part);

/* A family's markup. */
typedef struct tern_reply_dialect {
    const char *name;
    const char *think_open, *think_close; /* reasoning markers */
    int think_named;                      /* a channel-name line follows think_open (Gemma 4) */
    const char *call_open, *call_close;   /* tool call markers; call_close NULL: the call runs to the end */
    int call_bare;                        /* a reply that opens with '{' may be a call with no marker at all */
    /* A forced call as the tool-call grammar writes it: open, the name, mid, the arguments, close; the arguments
     * in JSON, or (json_args 0) in Gemma 4's syntax. */
    const char *force_open, *force_mid, *force_close;
    int json_args;
    /* Parses a call's body (the text between the markers) into a malloc'd *name and a JSON object *args. */
    tern_err *(*parse_call)(const char *body, size_t len, char **name, json_t **args);
} tern_reply_dialect;

extern const tern_reply_dialect tern_dialect_gemma4, tern_dialect_hermes, tern_dialect_llama3;

/* A JSON tool call body: {"name": NAME, "arguments"|"parameters": {...}} (arguments may also be a JSON text
 * holding the object, as OpenAI's own messages carry them). */
TERN_MUST_CHECK tern_err *tern_json_parse_tool_call(const char *body, size_t len, char **name, json_t **args);

typedef struct tern_reply_parser tern_reply_parser;

/* A parser for dialect d (NULL: Gemma 4's); with parse_tools 0 tool-call markup stays content (the thinking
 * channel is always split). */
TERN_MUST_CHECK tern_err *tern_reply_parser_new(const tern_reply_dialect *d, int parse_tools, tern_reply_parser **out);
/* Feeds the next len bytes of generated text; complete parts go to fn(user, part) in order. */
TERN_MUST_CHECK tern_err *tern_reply_parser_push(tern_reply_parser *p, const char *text, size_t len, tern_reply_fn fn, void *user);
/* The text has ended: reports what was held back (an unfinished tool call comes out as content, verbatim). */
TERN_MUST_CHECK tern_err *tern_reply_parser_finish(tern_reply_parser *p, tern_reply_fn fn, void *user);
/* Tool calls that did not parse (and were passed on as content), by every parser of this process so far. */
unsigned long long tern_reply_malformed_tool_calls(void);
/* Number of tool calls reported so far. */
int tern_reply_parser_tool_calls(const tern_reply_parser *p);
/* Frees the parser; NULL is fine. */
void tern_reply_parser_free(tern_reply_parser *p);

/* Parses the text between <|tool_call> and <tool_call|> ("call:NAME{ARGS}") into a malloc'd *name and a new
 * JSON object *args (json_decref it). Errors say what was expected at which byte offset. */
TERN_MUST_CHECK tern_err *tern_g4_parse_tool_call(const char *body, size_t len, char **name, json_t **args);
/* Parses one Gemma 4 argument value (string, number, boolean, null, object, array) spanning all len bytes. */
TERN_MUST_CHECK tern_err *tern_g4_parse_value(const char *text, size_t len, json_t **out);

#endif
