/* replay_main.c — drives a libFuzzer-style target without libFuzzer: runs every
 * file of the corpus directory, then deterministic mutations of each (byte
 * flips, truncations, splices of random bytes), so the sanitizer build
 * exercises each parser on hostile input in every CI run. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void run_mutations(const uint8_t *seed, size_t n, int rounds) {
    uint8_t *buf = malloc(n + 64);
    if (!buf)
        return;
    for (int r = 0; r < rounds; r++) {
        memcpy(buf, seed, n);
        size_t len = n;
        int edits = 1 + (int)(next_rand() % 8);
        for (int k = 0; k < edits && len; k++) {
            size_t at = next_rand() % len;
            switch (next_rand() % 4) {
            case 0: buf[at] ^= (uint8_t)(1u << (next_rand() % 8)); break;
            case 1: buf[at] = (uint8_t)next_rand(); break;
            case 2: len = at; break; /* truncate */
            case 3: buf[at] = (uint8_t)"\0\xff\x7f\x80{}[]\":,0"[next_rand() % 12]; break;
            }
        }
        LLVMFuzzerTestOneInput(buf, len);
    }
    free(buf);
}

int main(int argc, char **argv) {
    int files = 0;
    int rounds = getenv("FUZZ_ROUNDS") ? atoi(getenv("FUZZ_ROUNDS")) : 300;
    for (int a = 1; a < argc; a++) {
        DIR *d = opendir(argv[a]);
        if (!d) {
            fprintf(stderr, "replay: cannot open corpus %s\n", argv[a]);
            return 1;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.')
                continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[a], de->d_name);
            FILE *f = fopen(path, "rb");
            if (!f)
                continue;
            fseek(f, 0, SEEK_END);
            long n = ftell(f);
            fseek(f, 0, SEEK_SET);
            uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
            if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
                LLVMFuzzerTestOneInput(buf, (size_t)n);
                run_mutations(buf, (size_t)n, rounds);
                files++;
            }
            free(buf);
            fclose(f);
        }
        closedir(d);
    }
    LLVMFuzzerTestOneInput((const uint8_t *)"", 0);
    printf("replayed %d corpus files with %d mutations each\n", files, rounds);
    return files > 0 ? 0 : 1;
}
