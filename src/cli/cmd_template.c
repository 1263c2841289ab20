/* cmd_template.c — `tern template TEMPLATE CONTEXT.json`: renders a chat template with the
 * variables of a JSON object (messages, tools, add_generation_prompt, bos_token, ...) and
 * writes the result to stdout, byte for byte. TEMPLATE is a .jinja file, or a model
 * directory whose chat template is used (chat_template.jinja / tokenizer_config.json). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"
#include "cli/commands.h"
#include "core/fileio.h"
#include "core/json_util.h"

#define MAX_TEMPLATE_BYTES ((size_t)16 << 20)
#define MAX_CONTEXT_BYTES ((size_t)256 << 20)

static void usage(FILE *f) {
    fprintf(f,
            "usage: tern template TEMPLATE CONTEXT.json\n"
            "\n"
            "Renders a chat template (Jinja, as Hugging Face renders it) with the variables of\n"
            "CONTEXT.json, a JSON object such as\n"
            "  {\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"add_generation_prompt\": true,\n"
            "   \"bos_token\": \"<bos>\", \"tools\": [...], \"enable_thinking\": false}\n"
            "and writes the result to stdout. TEMPLATE is a .jinja file or a model directory\n"
            "(its chat_template.jinja, or the chat_template of tokenizer_config.json).\n");
}

int cmd_template(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc != 3) {
        usage(stderr);
        return 2;
    }
    const char *tpl_path = argv[1], *ctx_path = argv[2];
    char *src = NULL, *origin = NULL, *out = NULL;
    size_t src_len = 0, out_len = 0;
    json_t *ctx = NULL;
    tern_jinja *tpl = NULL;
    tern_err *e;
    if (tern_is_dir(tpl_path))
        e = tern_chat_template_load(tpl_path, &src, &src_len, &origin);
    else
        e = tern_read_file(tpl_path, MAX_TEMPLATE_BYTES, &src, &src_len);
    if (!e)
        e = tern_jinja_compile(src, src_len, origin ? origin : tpl_path, &tpl);
    if (!e)
        e = tern_json_load_file(ctx_path, MAX_CONTEXT_BYTES, &ctx);
    if (!e && !json_is_object(ctx))
        e = tern_errf(TERN_EINVAL, "%s: the context must be a JSON object", ctx_path);
    if (!e)
        e = tern_jinja_render(tpl, ctx, NULL, &out, &out_len);
    int rc = 0;
    if (e) {
        fprintf(stderr, "tern template: %s\n", tern_err_msg(e));
        tern_err_free(e);
        rc = 1;
    } else if (fwrite(out, 1, out_len, stdout) != out_len || fflush(stdout)) {
        fprintf(stderr, "tern template: cannot write the output\n");
        rc = 1;
    }
    free(out);
    tern_jinja_free(tpl);
    json_decref(ctx);
    free(src);
    free(origin);
    return rc;
}
