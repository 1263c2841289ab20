// llama_ids.cpp — llama.cpp's side of the comparison (vs-llamacpp.sh): loads a vocabulary-only GGUF file and
// prints, for each string of a batch file (each: 4-byte little-endian length, then the bytes), its ids on one
// line (no BOS, special tokens not parsed).
#include "llama.h"
#include <cstdio>
#include <cstdint>
#include <vector>
#include <string>
int main(int argc, char **argv) {
    llama_backend_init();
    auto mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model *m = llama_model_load_from_file(argv[1], mp);
    if (!m) return 1;
    const llama_vocab *v = llama_model_get_vocab(m);
    FILE *f = fopen(argv[2], "rb");
    uint32_t n;
    while (fread(&n, 4, 1, f) == 1) {
        std::string s(n, 0);
        if (n) fread(&s[0], 1, n, f);
        std::vector<llama_token> ids(n * 4 + 16);
        int k = llama_tokenize(v, s.data(), (int)s.size(), ids.data(), (int)ids.size(), false, false);
        for (int i = 0; i < k; i++) printf(i ? " %d" : "%d", ids[i]);
        printf("\n");
    }
    return 0;
}
