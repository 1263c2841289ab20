// llama_logits.cpp — llama.cpp's logits of a GGUF model at every position of one prompt, the golden side of the
// GGUF parity tests: CPU, float32 KV cache, no flash attention, the prompt in one batch.
//   llama_logits MODEL.gguf 2,105,... OUT.bin      writes float32 [positions][vocab] (after the soft-cap)
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: llama_logits MODEL.gguf ID,ID,... OUT.bin\n");
        return 2;
    }
    std::vector<llama_token> ids;
    for (char *p = argv[2]; *p;) {
        ids.push_back((llama_token)strtol(p, &p, 10));
        if (*p == ',')
            p++;
    }
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model *m = llama_model_load_from_file(argv[1], mp);
    if (!m)
        return 1;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = cp.n_ubatch = 256;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    llama_context *ctx = llama_init_from_model(m, cp);
    if (!ctx)
        return 1;
    const int n = (int)ids.size(), vocab = llama_vocab_n_tokens(llama_model_get_vocab(m));
    llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = ids[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = n;
    if (llama_decode(ctx, b))
        return 1;
    FILE *f = fopen(argv[3], "wb");
    for (int i = 0; i < n; i++)
        fwrite(llama_get_logits_ith(ctx, i), sizeof(float), (size_t)vocab, f);
    fclose(f);
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(m);
    return 0;
}
