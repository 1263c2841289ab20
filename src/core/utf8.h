/* utf8.h — writing a code point as UTF-8, which the tokenizer and the grammar compiler both need. */
#ifndef TERN_CORE_UTF8_H
#define TERN_CORE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Writes code point cp (<= U+10FFFF) as 1 to 4 UTF-8 bytes into out; returns how many. */
size_t tern_utf8_put(uint32_t cp, char *out);

#endif
