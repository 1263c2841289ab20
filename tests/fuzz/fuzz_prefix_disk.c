/* fuzz_prefix_disk.c — fuzz target for the prompt cache's disk files: the input is written as a block file into a
 * fresh tier folder (named after the chain hash its header claims, and under the key it claims, so well-formed
 * inputs reach every check), the tier is opened (the scan reads headers and ids) and the block is looked up and read
 * back with the ids the input carries (length, chain, checksum). Whatever the bytes, nothing may be trusted beyond
 * what was checked, and a file that is not sound must be gone afterwards. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kv/prefix_disk.h"

#define BLOCK 4
#define BLOCK_BYTES 64

static void remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (unlink(path))
            remove_tree(path);
    }
    closedir(d);
    rmdir(dir);
}

static uint64_t u64_at(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char root[128], sub[256], path[512];
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof root, "%.64s/tern-fuzz-prefix-disk.%ld", tmp && *tmp ? tmp : "/tmp", (long)getpid());
    remove_tree(root);
    uint64_t key = size >= 24 ? u64_at(data + 16) : 1, chain = size >= 40 ? u64_at(data + 32) : 2;
    snprintf(sub, sizeof sub, "%s/%016llx", root, (unsigned long long)key);
    mkdir(root, 0755);
    mkdir(sub, 0755);
    snprintf(path, sizeof path, "%s/%016llx.kvb", sub, (unsigned long long)chain);
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    tern_pc_disk *d = NULL;
    tern_err *err = tern_pc_disk_open(root, key, BLOCK, BLOCK_BYTES, 1u << 20, &d);
    if (err) {
        tern_err_free(err);
        remove_tree(root);
        return 0;
    }
    int32_t ids[BLOCK] = {0}, got_ids[BLOCK];
    uint32_t len = size >= 16 ? (uint32_t)data[12] : 0;
    if (size >= 64 + BLOCK * 4)
        memcpy(ids, data + 64, sizeof ids);
    uint64_t parent = size >= 32 ? u64_at(data + 24) : 0;
    unsigned char buf[BLOCK_BYTES];
    int64_t n = 0;
    tern_pc_disk_get_block(d, parent, ids, buf);
    tern_pc_disk_get_best(d, parent, ids, len >= 1 && len <= BLOCK ? len : BLOCK, got_ids, &n, buf);
    tern_pc_disk_stats st;
    tern_pc_disk_stats_get(d, &st);
    tern_pc_disk_close(d);
    /* what is still there was accepted: it must be a sound file, i.e. the counts add up */
    if (st.files + st.removed_bad > 1)
        abort();
    remove_tree(root);
    return 0;
}
