/* tern_ids.c — tern's side of the comparison (vs-llamacpp.sh): the same batch file and output as llama_ids.cpp. */
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include "tokenizer/tokenizer.h"
int main(int argc, char **argv) {
    tern_tokenizer *t;
    tern_err *e = tern_tokenizer_load(argv[1], &t);
    if (e) { fprintf(stderr, "%s\n", tern_err_msg(e)); return 1; }
    FILE *f = fopen(argv[2], "rb");
    uint32_t n;
    while (fread(&n, 4, 1, f) == 1) {
        char *s = malloc(n + 1);
        if (n) fread(s, 1, n, f);
        tern_tokens ids = {0};
        e = tern_tokenize(t, s, n, 0, 0, &ids);
        if (e) { printf("ERROR %s\n", tern_err_msg(e)); tern_err_free(e); free(s); continue; }
        for (size_t i = 0; i < ids.n; i++) printf(i ? " %d" : "%d", ids.ids[i]);
        printf("\n");
        tern_tokens_free(&ids);
        free(s);
    }
    return 0;
}
