/* generate.c — the smallest complete libtern program: load a model, start an engine, stream one greedy
 * completion of a text prompt to stdout.
 *
 *   cc generate.c $(pkg-config --cflags --libs tern) -o generate
 *   ./generate MODEL_DIR "Once upon a time" 32
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>

static int fail(tern_err *err) {
    fprintf(stderr, "generate: %s\n", tern_err_msg(err));
    tern_err_free(err);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: generate MODEL_DIR PROMPT [MAX_TOKENS]\n");
        return 2;
    }
    fprintf(stderr, "libtern %s (built against %s)\n", tern_version(), TERN_VERSION);

    tern_model_opts mo = {.model_dir = argv[1]};
    tern_model *model = NULL;
    tern_err *err = tern_model_load(&mo, &model);
    if (err)
        return fail(err);

    tern_engine_opts eo;
    tern_engine_opts_default(&eo);
    eo.parallel = 1;
    tern_engine *engine = NULL;
    if ((err = tern_engine_create(model, &eo, &engine))) {
        tern_model_free(model);
        return fail(err);
    }

    tern_request req;
    tern_request_default(&req); /* greedy */
    req.prompt_text = argv[2];
    req.prompt_text_len = strlen(argv[2]);
    req.add_special = 1;
    req.max_tokens = argc > 3 ? atoi(argv[3]) : 32;
    tern_stream *stream = NULL;
    int status = 0;
    if ((err = tern_engine_submit(engine, &req, NULL, NULL, &stream, NULL))) {
        status = fail(err);
    } else {
        tern_event ev;
        while (tern_stream_next(stream, &ev, -1) == 1) {
            fwrite(ev.text, 1, ev.text_len, stdout);
            fflush(stdout);
            if (ev.kind != TERN_EV_DONE)
                continue;
            printf("\n");
            if (ev.finish == TERN_FINISH_ERROR) {
                fprintf(stderr, "generate: %s\n", ev.error);
                status = 1;
            } else {
                fprintf(stderr, "%lld prompt tokens, %lld generated\n", (long long)ev.usage.prompt_tokens,
                        (long long)ev.usage.completion_tokens);
            }
        }
    }
    tern_stream_free(stream);
    tern_engine_destroy(engine);
    tern_model_free(model);
    return status;
}
