/* checksum.h — a fast checksum of large byte ranges (the packed-weights cache's), at memory speed.
 *
 * Definition (every ISA computes exactly this; kernels_portable.c is the reference). Bytes go in blocks of 128,
 * each read as 16 little-endian 64-bit words d[0..15]; block b (from 0) uses the keys
 * key[j] = (j + 1) * K + b * G, and each of 16 lanes j accumulates
 *     k = d[j] ^ key[j];   acc[j] += (k mod 2^32) * (k >> 32) + d[j ^ 1]        (mod 2^64),
 * the lanes starting at splitmix64(seed + j * G). A last partial block is zero-padded. The result mixes the 16
 * lanes and the byte count. A data word enters once through a product of its halves and once as itself, each
 * block under its own keys: a changed bit, a moved, lost or zeroed block changes the result (not a defence
 * against deliberate forgery). */
#ifndef TERN_TENSOR_CHECKSUM_H
#define TERN_TENSOR_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

#define TERN_CHECKSUM_K 0xd6e8feb86659fd93ull
#define TERN_CHECKSUM_G 0x9e3779b97f4a7c15ull

/* The checksum of p[0, n) with `seed`, through the active ISA's kernel. */
uint64_t tern_checksum(const void *p, size_t n, uint64_t seed);

#endif
