/* test_server_audio.c — audio through `tern serve` end to end, on a synthetic tiny model with an audio tower and the
 * real Gemma 4 vocabulary and template (`tern synth --audio`): the official `openai` npm client's chat with
 * input_audio / audio_url, streaming, the prefix cache across clips and transcriptions
 * (tests/server/openai_audio.mjs); then the 400s a user can act on — a model without a tower, more audio than the
 * context holds, broken multipart uploads — with the server answering normally afterwards. */
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
    snprintf(base, sizeof base, "%s", tu_tmpdir("server-audio-model"));
    snprintf(model, sizeof model, "%s/m", base); /* the model id the node scripts expect is "m" */
    snprintf(cmd, sizeof cmd, "'%s' synth --preset tiny --dtype bf16 --seed 3 --audio '%s' >/dev/null", tu_tern_bin(),
             model);
    if (tu_run(cmd, NULL) != 0) {
        print_error("tern synth --audio failed\n");
        return -1;
    }
    ts_start_model(&S, model, "--parallel 2 --ctx 2048");
    return 0;
}

static int teardown(void **state) {
    ts_stop(&S);
    return 0;
}

static void test_node_audio(void **state) {
    char *out = NULL, clip[4200];
    snprintf(clip, sizeof clip, "'%s'", tu_testdata("audio/short.wav"));
    int rc = ts_node(&S, "openai_audio.mjs", clip, &out);
    if (rc != 0 || !strstr(out, "ok "))
        print_error("%s\n", out ? out : "(no output)");
    assert_int_equal(rc, 0);
    printf("  openai_audio.mjs: %s", out);
    free(out);
}

/* A chat body with `n` copies of the clip. */
static char *chat_with_clips(int n) {
    char *wav;
    size_t len;
    TU_OK(tern_read_file(tu_testdata("audio/short.wav"), 1 << 20, &wav, &len));
    char *b64 = tern_base64_encode(wav, len);
    free(wav);
    size_t cap = (strlen(b64) + 128) * (size_t)n + 256;
    char *body = malloc(cap);
    size_t o = (size_t)snprintf(body, cap, "{\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":[");
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(body + o, cap - o, "%s{\"type\":\"input_audio\",\"input_audio\":{\"data\":\"%s\","
                                                 "\"format\":\"wav\"}}", i ? "," : "", b64);
    snprintf(body + o, cap - o, ",{\"type\":\"text\",\"text\":\"hi\"}]}]}");
    free(b64);
    return body;
}

static void expect_status(int port, const char *path, const char *headers, const char *body, int status,
                          const char *needle) {
    ts_resp r;
    ts_http(port, "POST", path, headers, body, &r);
    if (r.status != status || !strstr(r.body, needle))
        print_error("%s: status %d body %s\n", path, r.status, r.body);
    assert_int_equal(r.status, status);
    assert_non_null(strstr(r.body, needle));
    ts_resp_free(&r);
}

/* More audio than a request's context holds, and a text-only model, are 400s naming the problem. */
static void test_limits(void **state) {
    ts_server small;
    ts_start_model(&small, model, "--parallel 1 --ctx 64");
    char *two = chat_with_clips(2);
    expect_status(small.port, "/v1/chat/completions", "Content-Type: application/json\r\n", two, 400,
                  "but a request may hold 64");
    free(two);
    ts_stop(&small);

    ts_server text;
    ts_start(&text, "--parallel 1 --ctx 512");
    char *one = chat_with_clips(1);
    expect_status(text.port, "/v1/chat/completions", "Content-Type: application/json\r\n", one, 400,
                  "no audio tower");
    expect_status(text.port, "/v1/audio/transcriptions", "Content-Type: multipart/form-data; boundary=x\r\n",
                  "--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\nRIFF\r\n--x--\r\n", 400,
                  "no audio tower");
    free(one);
    ts_stop(&text);
}

/* Broken uploads are 400s; the server goes on answering. */
static void test_bad_uploads(void **state) {
    const char *ct = "Content-Type: multipart/form-data; boundary=BOUND\r\n";
    expect_status(S.port, "/v1/audio/transcriptions", "Content-Type: application/json\r\n", "{}", 400,
                  "multipart/form-data");
    expect_status(S.port, "/v1/audio/transcriptions", ct, "--BOUND\r\nContent-Disposition: form-data; name=\"model\"\r\n"
                                                          "\r\nm\r\n--BOUND--\r\n", 400, "'file': required");
    expect_status(S.port, "/v1/audio/transcriptions", ct, "--BOUND\r\nContent-Disposition: form-data; name=\"file\"; "
                                                          "filename=\"a.wav\"\r\n\r\nRIFF", 400, "");
    expect_status(S.port, "/v1/audio/transcriptions", ct, "--BOUND\r\nContent-Disposition: form-data; name=\"file\"; "
                                                          "filename=\"a.wav\"\r\n\r\nnot audio at all\r\n--BOUND--\r\n",
                  400, "WAV");
    expect_status(S.port, "/v1/audio/transcriptions", ct, "--BOUND\r\nContent-Disposition: form-data; name=\"file\"; "
                                                          "filename=\"a.wav\"\r\n\r\nRIFF\r\n--BOUND\r\nContent-"
                                                          "Disposition: form-data; name=\"temperature\"\r\n\r\nhot\r\n"
                                                          "--BOUND--\r\n", 400, "'temperature'");
    ts_resp r;
    ts_http(S.port, "GET", "/health", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    ts_resp_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_audio),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_bad_uploads),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
