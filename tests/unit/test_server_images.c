/* test_server_images.c — images through `tern serve` end to end, on a synthetic tiny model with a vision tower and
 * the real Gemma 4 vocabulary and template (`tern synth --vision`): the official `openai` and Anthropic npm clients
 * (tests/server/openai_images.mjs); then the bad-input catalogue — corrupt, truncated and unsupported files, a
 * decompression bomb, an animation, too many images, more image than the context holds, a model without a tower,
 * image URLs fetched only when allowed — each a 400 with its reason, the server answering normally afterwards. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base64.h"
#include "core/fileio.h"
#include "testutil.h"
#include "server_util.h"

static ts_server S;
static char model[4200];

static int setup(void **state) {
    char base[4096], cmd[10000];
    snprintf(base, sizeof base, "%s", tu_tmpdir("server-images-model"));
    snprintf(model, sizeof model, "%s/m", base); /* the model id the node script expects is "m" */
    snprintf(cmd, sizeof cmd, "'%s' synth --preset tiny --dtype f32 --seed 5 --vision '%s' >/dev/null", tu_tern_bin(),
             model);
    if (tu_run(cmd, NULL) != 0) {
        print_error("tern synth --vision failed\n");
        return -1;
    }
    ts_start_model(&S, model, "--parallel 2 --ctx 2048");
    return 0;
}

static int teardown(void **state) {
    ts_stop(&S);
    return 0;
}

static void test_node_images(void **state) {
    char *out = NULL, args[9000];
    snprintf(args, sizeof args, "'%s'", tu_testdata("image/photo.png"));
    snprintf(args + strlen(args), sizeof args - strlen(args), " '%s'", tu_testdata("vision/other.png"));
    int rc = ts_node(&S, "openai_images.mjs", args, &out);
    if (rc != 0 || !strstr(out, "ok "))
        print_error("%s\n", out ? out : "(no output)");
    assert_int_equal(rc, 0);
    printf("  openai_images.mjs: %s", out);
    free(out);
}

/* A chat body with `n` copies of the bytes as data-URI images at `detail`. */
static char *chat_with_images(const void *bytes, size_t len, int n, const char *detail) {
    char *b64 = tern_base64_encode(bytes, len);
    size_t cap = (strlen(b64) + 160) * (size_t)n + 256;
    char *body = malloc(cap);
    size_t o = (size_t)snprintf(body, cap, "{\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":[");
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(body + o, cap - o, "%s{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;"
                                                 "base64,%s\",\"detail\":\"%s\"}}", i ? "," : "", b64, detail);
    snprintf(body + o, cap - o, ",{\"type\":\"text\",\"text\":\"hi\"}]}]}");
    free(b64);
    return body;
}

static char *chat_with_file(const char *rel, int n, const char *detail) {
    char *bytes;
    size_t len;
    TU_OK(tern_read_file(tu_testdata(rel), 1 << 24, &bytes, &len));
    char *body = chat_with_images(bytes, len, n, detail);
    free(bytes);
    return body;
}

static void expect_400(int port, const char *body, const char *needle) {
    ts_resp r;
    ts_http(port, "POST", "/v1/chat/completions", "Content-Type: application/json\r\n", body, &r);
    if (r.status != 400 || !strstr(r.body, needle))
        print_error("status %d body %s (expected 400 with \"%s\")\n", r.status, r.body, needle);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, needle));
    ts_resp_free(&r);
}

static void test_bad_images(void **state) {
    static const struct {
        const char *file, *needle;
    } cases[] = {
        {"image/bomb.png", "30000 x 30000 pixels"},
        {"image/animated.png", "PNG is animated"},
        {"image/animated.webp", "WebP is animated"},
        {"audio/short.wav", "not an image format"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *body = chat_with_file(cases[i].file, 1, "low");
        expect_400(S.port, body, cases[i].needle);
        free(body);
    }
    /* Truncated and corrupted files: the decoder's reason. */
    char *png;
    size_t len;
    TU_OK(tern_read_file(tu_testdata("image/photo.png"), 1 << 20, &png, &len));
    char *body = chat_with_images(png, len / 2, 1, "low");
    expect_400(S.port, body, "could not be decoded");
    free(body);
    for (size_t k = 100; k < len; k += 7)
        png[k] ^= 0x33;
    body = chat_with_images(png, len, 1, "low");
    expect_400(S.port, body, "could not be decoded");
    free(body);
    free(png);
    body = chat_with_file("image/photo.png", 17, "low");
    expect_400(S.port, body, "17 images in one request; at most 16");
    free(body);
    ts_resp r;
    ts_http(S.port, "GET", "/health", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    ts_resp_free(&r);
}

/* More image than a request's context holds, and a text-only model, are 400s naming the problem. */
static void test_limits(void **state) {
    ts_server small;
    ts_start_model(&small, model, "--parallel 1 --ctx 256");
    char *body = chat_with_file("image/photo.png", 1, "high");
    expect_400(small.port, body, "but a request may hold 256");
    ts_stop(&small);

    ts_server text;
    ts_start(&text, "--parallel 1 --ctx 512");
    expect_400(text.port, body, "no vision tower");
    free(body);
    ts_stop(&text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_images),
        cmocka_unit_test(test_bad_images),
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
