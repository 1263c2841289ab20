/* sha.h — SHA-256 and SHA-1 (FIPS 180-4), streaming: what the Hugging Face hub names files by. An LFS file's ETag
 * is the SHA-256 of its bytes; any other file's is its git blob id, the SHA-1 of "blob SIZE\0" and the bytes. */
#ifndef TERN_HUB_SHA_H
#define TERN_HUB_SHA_H

#include <stddef.h>
#include <stdint.h>

typedef struct hub_sha {
    uint32_t h[8];
    uint8_t buf[64];
    uint64_t n;   /* bytes fed */
    int sha1;     /* 1: SHA-1 (5 words of state), 0: SHA-256 */
} hub_sha;

/* Starts a SHA-256 (sha1 = 0) or SHA-1 (sha1 = 1) digest. */
void hub_sha_init(hub_sha *s, int sha1);
/* Feeds n bytes. */
void hub_sha_feed(hub_sha *s, const void *p, size_t n);
/* Finishes: the digest as lowercase hex (64 characters for SHA-256, 40 for SHA-1) and a NUL into hex. */
void hub_sha_hex(hub_sha *s, char hex[65]);

#endif
