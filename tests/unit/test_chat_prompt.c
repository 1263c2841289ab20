/* test_chat_prompt.c — chat messages to prompts with the real Gemma 4 template: exact renderings for plain
 * chat, system turns, thinking on, content parts, tools with a tool-call round trip (arguments given as JSON
 * text), the same conversation in Anthropic form giving the same prompt, every rendering also checked against
 * @huggingface/jinja (node) on the very context we built, the validation errors that name the field, and
 * tokenization of a rendered prompt to the ids of GEMMA4.md §3 with exactly one BOS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_prompt.h"
#include "core/fileio.h"
#include "loader/loader.h"
#include "testutil.h"

/* The demo model (tern synth: tiny shape, the Gemma 4 vocabulary and the chat template it ships), made once. */
static char MODEL[4200];

static int setup(void **state) {
    const char *dir = tu_tmpdir("chat-prompt-model");
    char cmd[8192];
    snprintf(MODEL, sizeof MODEL, "%s/m", dir);
    snprintf(cmd, sizeof cmd, "'%s' synth --preset tiny --dtype bf16 --seed 1 '%s' >/dev/null", tu_tern_bin(), MODEL);
    return tu_run(cmd, NULL) == 0 ? 0 : -1;
}

/* The template the tests render with: the 31B-it one from testdata unless set to another file. */
static char TEMPLATE[4300];

static const char *template_path(void) {
    if (!TEMPLATE[0])
        snprintf(TEMPLATE, sizeof TEMPLATE, "%s", tu_testdata("templates/google-gemma-4-31B-it.jinja"));
    return TEMPLATE;
}

static tern_jinja *gemma_template(void) {
    char *src;
    size_t len;
    TU_OK(tern_read_file(template_path(), 1 << 20, &src, &len));
    tern_jinja *tpl;
    TU_OK(tern_jinja_compile(src, len, "gemma4", &tpl));
    free(src);
    return tpl;
}

/* Renders {"messages":..., "tools":..., "chat_template_kwargs":...} given as JSON text; also renders the very
 * same context with @huggingface/jinja and requires identical bytes. Returns a malloc'd prompt. */
static char *render_request(const char *req_json, int add_gen) {
    json_t *req = json_loads(req_json, 0, NULL);
    assert_non_null(req);
    char *tsrc;
    size_t tlen;
    TU_OK(tern_read_file(template_path(), 1 << 20, &tsrc, &tlen));
    tern_chat_input in = {.messages = json_object_get(req, "messages"),
                          .tools = json_object_get(req, "tools"),
                          .template_kwargs = json_object_get(req, "chat_template_kwargs"),
                          .add_generation_prompt = add_gen,
                          .fold_tool_results = tern_chat_template_wants_tool_responses(tsrc),
                          .bos_token = "<bos>",
                          .eos_token = "<eos>"};
    json_t *ctx;
    TU_OK(tern_chat_build_context(&in, &ctx));
    free(tsrc);
    tern_jinja *tpl = gemma_template();
    char *out;
    size_t len;
    TU_OK(tern_chat_render(tpl, ctx, &out, &len));
    assert_int_equal(strlen(out), len);

    const char *dir = tu_tmpdir("chat-prompt-oracle");
    char *ctx_text = json_dumps(ctx, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    char ctx_path[4096], cmd[16384];
    snprintf(ctx_path, sizeof ctx_path, "%s", tu_write(dir, "ctx.json", ctx_text, strlen(ctx_text)));
    free(ctx_text);
    const char *src = getenv("TERN_SOURCE_DIR") ? getenv("TERN_SOURCE_DIR") : ".";
    snprintf(cmd, sizeof cmd, "node '%s/tests/oracles/render_jinja.mjs' '%s' '%s'", src, template_path(), ctx_path);
    char *oracle = NULL;
    int rc = tu_run(cmd, &oracle);
    if (rc == 0) {
        assert_string_equal(out, oracle);
    } else {
        print_message("(oracle unavailable: node exited %d)\n", rc);
    }
    free(oracle);
    tern_jinja_free(tpl);
    json_decref(ctx);
    json_decref(req);
    return out;
}

static void expect_render(const char *req, const char *expected) {
    char *out = render_request(req, 1);
    assert_string_equal(out, expected);
    free(out);
}

static void test_plain_chat(void **state) {
    expect_render("{\"messages\":[{\"role\":\"user\",\"content\":\"What is 2+2?\"}]}",
                  "<bos><|turn>user\nWhat is 2+2?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
    expect_render("{\"messages\":[{\"role\":\"system\",\"content\":\" Be brief. \"},"
                  "{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":\"Hello!\"},"
                  "{\"role\":\"user\",\"content\":\"Bye\"}]}",
                  "<bos><|turn>system\nBe brief.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\nHello!<turn|>\n"
                  "<|turn>user\nBye<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
    /* "developer" is a system turn too; text parts are joined with newlines. */
    expect_render("{\"messages\":[{\"role\":\"developer\",\"content\":[{\"type\":\"text\",\"text\":\"A\"},"
                  "{\"type\":\"text\",\"text\":\"B\"}]},{\"role\":\"user\",\"content\":[{\"type\":\"text\","
                  "\"text\":\"one\"},{\"type\":\"text\",\"text\":\"two\"}]}]}",
                  "<bos><|turn>system\nA\nB<turn|>\n<|turn>user\none\ntwo<turn|>\n<|turn>model\n<|channel>thought\n"
                  "<channel|>");
    /* No generation prompt when asked. */
    char *out = render_request("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", 0);
    assert_string_equal(out, "<bos><|turn>user\nx<turn|>\n");
    free(out);
}

static void test_thinking(void **state) {
    expect_render("{\"messages\":[{\"role\":\"user\",\"content\":\"Why?\"}],"
                  "\"chat_template_kwargs\":{\"enable_thinking\":true}}",
                  "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nWhy?<turn|>\n<|turn>model\n");
    /* A previous answer's thinking is stripped from history by the template. */
    expect_render("{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":"
                  "\"<|channel>thought\\nhmm<channel|>Yes\"},{\"role\":\"user\",\"content\":\"b\"}]}",
                  "<bos><|turn>user\na<turn|>\n<|turn>model\nYes<turn|>\n<|turn>user\nb<turn|>\n<|turn>model\n"
                  "<|channel>thought\n<channel|>");
}

static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather for a city\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"description\":\"City\"}},"
    "\"required\":[\"city\"]}}}]";

static const char TOOL_ROUND_TRIP_PROMPT[] =
    "<bos><|turn>system\n<|tool>declaration:get_weather{description:<|\"|>Weather for a city<|\"|>,parameters:{"
    "properties:{city:{description:<|\"|>City<|\"|>,type:<|\"|>STRING<|\"|>}},required:[<|\"|>city<|\"|>],"
    "type:<|\"|>OBJECT<|\"|>}}<tool|><turn|>\n<|turn>user\nWeather in Paris?<turn|>\n<|turn>model\n"
    "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|><|tool_response>response:get_weather{"
    "value:<|\"|>sunny, 21C<|\"|>}<tool_response|>";

static void test_tools_round_trip(void **state) {
    char req[8192];
    /* OpenAI form: arguments as JSON text, the result in a tool message found by tool_call_id. */
    snprintf(req, sizeof req,
             "{\"tools\":%s,\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
             "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\","
             "\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\"}}]},"
             "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"sunny, 21C\"}]}",
             TOOLS);
    expect_render(req, TOOL_ROUND_TRIP_PROMPT);

    /* The same conversation in Anthropic form maps onto the same prompt. */
    json_t *areq = json_loads(
        "{\"tools\":[{\"name\":\"get_weather\",\"description\":\"Weather for a city\",\"input_schema\":{\"type\":"
        "\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"description\":\"City\"}},\"required\":"
        "[\"city\"]}}],\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},{\"role\":\"assistant\","
        "\"content\":[{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\",\"input\":{\"city\":"
        "\"Paris\"}}]},{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\","
        "\"content\":[{\"type\":\"text\",\"text\":\"sunny, 21C\"}]}]}]}",
        0, NULL);
    assert_non_null(areq);
    json_t *msgs, *tools;
    TU_OK(tern_chat_from_anthropic(areq, &msgs, &tools));
    json_t *oreq = json_pack("{s:o,s:o}", "messages", msgs, "tools", tools);
    char *text = json_dumps(oreq, JSON_COMPACT | JSON_PRESERVE_ORDER);
    expect_render(text, TOOL_ROUND_TRIP_PROMPT);
    free(text);
    json_decref(oreq);
    json_decref(areq);
}

/* The template `tern synth` ships (an earlier Gemma 4 revision) knows tool results only as the assistant's
 * "tool_responses"; OpenAI tool messages are folded into that form, the call's name found by tool_call_id. */
static void test_native_tool_responses(void **state) {
    snprintf(TEMPLATE, sizeof TEMPLATE, "%s/chat_template.jinja", MODEL);
    char *src;
    size_t len;
    TU_OK(tern_read_file(TEMPLATE, 1 << 20, &src, &len));
    assert_true(tern_chat_template_wants_tool_responses(src));
    free(src);
    char req[8192];
    snprintf(req, sizeof req,
             "{\"tools\":%s,\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
             "{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{"
             "\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}},{\"id\":\"c2\",\"type\":\"function\","
             "\"function\":{\"name\":\"get_time\",\"arguments\":\"{}\"}}]},"
             "{\"role\":\"tool\",\"tool_call_id\":\"c2\",\"content\":\"noon\"},"
             "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"sunny\"}]}",
             TOOLS);
    char *out = render_request(req, 1);
    const char *want = "<|turn>model\n<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>"
                       "<|tool_call>call:get_time{}<tool_call|><|tool_response>response:get_time{value:<|\"|>noon<|\"|>}"
                       "<tool_response|><|tool_response>response:get_weather{value:<|\"|>sunny<|\"|>}<tool_response|>";
    if (!strstr(out, want)) {
        print_error("rendered:\n%s\n", out);
        fail();
    }
    assert_null(strstr(out, "<|turn>tool"));
    free(out);
    TEMPLATE[0] = 0;
}

static void test_anthropic_system_and_thinking(void **state) {
    json_t *areq = json_loads(
        "{\"system\":[{\"type\":\"text\",\"text\":\"S1\"},{\"type\":\"text\",\"text\":\"S2\"}],\"messages\":["
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"q\"}]},{\"role\":\"assistant\",\"content\":"
        "[{\"type\":\"thinking\",\"thinking\":\"t\",\"signature\":\"\"},{\"type\":\"text\",\"text\":\"a\"}]},"
        "{\"role\":\"user\",\"content\":\"q2\"}]}",
        0, NULL);
    json_t *msgs, *tools;
    TU_OK(tern_chat_from_anthropic(areq, &msgs, &tools));
    assert_null(tools);
    char *s = json_dumps(msgs, JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_string_equal(s, "[{\"role\":\"system\",\"content\":\"S1\\nS2\"},{\"role\":\"user\",\"content\":\"q\"},"
                           "{\"role\":\"assistant\",\"content\":\"a\",\"reasoning_content\":\"t\"},"
                           "{\"role\":\"user\",\"content\":\"q2\"}]");
    free(s);
    json_decref(msgs);
    json_decref(areq);
}

static TERN_MUST_CHECK tern_err *build(const char *req_json) {
    json_t *req = json_loads(req_json, 0, NULL);
    assert_non_null(req);
    tern_chat_input in = {.messages = json_object_get(req, "messages"),
                          .tools = json_object_get(req, "tools"),
                          .template_kwargs = json_object_get(req, "chat_template_kwargs"),
                          .add_generation_prompt = 1};
    json_t *ctx = NULL;
    tern_err *err = tern_chat_build_context(&in, &ctx);
    json_decref(ctx);
    json_decref(req);
    return err;
}

/* Builds with audio (or, with `images`, image) parts taken out into *audio; returns the context's messages as compact
 * JSON (or NULL on error, with *err set). */
static char *build_media(const char *req_json, int images, json_t **audio, tern_err **err) {
    json_t *req = json_loads(req_json, 0, NULL);
    assert_non_null(req);
    *audio = json_array();
    tern_chat_input in = {.messages = json_object_get(req, "messages"), .add_generation_prompt = 1,
                          .audio = images ? NULL : *audio, .images = images ? *audio : NULL};
    json_t *ctx = NULL;
    *err = tern_chat_build_context(&in, &ctx);
    char *s = ctx ? json_dumps(json_object_get(ctx, "messages"), JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(ctx);
    json_decref(req);
    return s;
}

/* Audio parts leave {"type": "audio"} where they were, between the text around them, and come out in document
 * order with the path that names them in errors; malformed ones are refused with the field named. */
static void test_audio_parts(void **state) {
    json_t *audio;
    tern_err *err;
    char *s = build_media(
        "{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":["
        "{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"},"
        "{\"type\":\"input_audio\",\"input_audio\":{\"data\":\"UklGRg==\",\"format\":\"wav\"}},"
        "{\"type\":\"text\",\"text\":\"c\"},"
        "{\"type\":\"audio_url\",\"audio_url\":{\"url\":\"data:audio/mpeg;base64,SUQz\"}}]}]}",
        0, &audio, &err);
    TU_OK(err);
    assert_string_equal(s, "[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":["
                           "{\"type\":\"text\",\"text\":\"a\\nb\"},{\"type\":\"audio\"},{\"type\":\"text\",\"text\":\"c\"},"
                           "{\"type\":\"audio\"}]}]");
    free(s);
    char *a = json_dumps(audio, JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_string_equal(a, "[{\"data\":\"UklGRg==\",\"format\":\"wav\",\"path\":\"messages[1].content[2]\"},"
                           "{\"data\":\"SUQz\",\"format\":\"mpeg\",\"path\":\"messages[1].content[4]\"}]");
    free(a);
    json_decref(audio);
    static const struct {
        const char *part, *error;
    } bad[] = {
        {"{\"type\":\"input_audio\"}", "messages[0].content[0].input_audio: expected an object"},
        {"{\"type\":\"input_audio\",\"input_audio\":{\"data\":\"\"}}", "input_audio.data: expected the clip as a non-empty"},
        {"{\"type\":\"input_audio\",\"input_audio\":{\"data\":\"AAAA\",\"format\":\"midi\"}}", "audio format 'midi' is not supported"},
        {"{\"type\":\"input_audio\",\"input_audio\":{\"data\":\"AAAA\",\"format\":7}}", "input_audio.format: expected a string"},
        {"{\"type\":\"audio_url\",\"audio_url\":{\"url\":\"https://example.com/a.wav\"}}", "this server fetches no URLs"},
        {"{\"type\":\"audio_url\",\"audio_url\":{\"url\":\"data:audio/wav,AAAA\"}}", "expected data:audio/FORMAT;base64,DATA"},
        {"{\"type\":\"audio_url\",\"audio_url\":{\"url\":\"data:text/plain;base64,AAAA\"}}", "'text/plain' is not audio/*"},
        {"{\"type\":\"audio_url\",\"audio_url\":{\"url\":\"data:audio/wav;base64,\"}}", "holds no data"},
        {"{\"type\":\"audio_url\"}", "audio_url.url: expected a data: URI"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char req[512];
        snprintf(req, sizeof req, "{\"messages\":[{\"role\":\"user\",\"content\":[%s]}]}", bad[i].part);
        s = build_media(req, 0, &audio, &err);
        assert_null(s);
        TU_FAILS_WITH(err, bad[i].error);
        json_decref(audio);
    }
}

/* Image parts likewise: {"type": "image"} in place, data or URL with detail and path in document order; malformed
 * ones refused with the field named. */
static void test_image_parts(void **state) {
    json_t *images;
    tern_err *err;
    char *s = build_media("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                          "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,iVBO\",\"detail\":\"low\"}},"
                          "{\"type\":\"image_url\",\"image_url\":\"https://x.example/c.jpg\"},"
                          "{\"type\":\"text\",\"text\":\"b\"}]}]}",
                          1, &images, &err);
    TU_OK(err);
    assert_string_equal(s, "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"image\"},"
                           "{\"type\":\"image\"},{\"type\":\"text\",\"text\":\"b\"}]}]");
    free(s);
    char *a = json_dumps(images, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(a, "[{\"data\":\"iVBO\",\"detail\":\"low\",\"path\":\"messages[0].content[1]\"},"
                           "{\"detail\":\"auto\",\"path\":\"messages[0].content[2]\",\"url\":\"https://x.example/c.jpg\"}]");
    free(a);
    json_decref(images);
    static const struct {
        const char *part, *error;
    } bad[] = {
        {"{\"type\":\"image_url\"}", "messages[0].content[0].image_url.url: expected a data: URI"},
        {"{\"type\":\"image_url\",\"image_url\":{\"url\":\"ftp://x/y.png\"}}", "or an http(s) URL"},
        {"{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png,AAAA\"}}", "expected data:image/TYPE;base64"},
        {"{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:audio/wav;base64,AAAA\"}}", "'audio/wav' is not image/*"},
        {"{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,\"}}", "holds no data"},
        {"{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,AA\",\"detail\":\"max\"}}",
         "image_url.detail: expected"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char req[512];
        snprintf(req, sizeof req, "{\"messages\":[{\"role\":\"user\",\"content\":[%s]}]}", bad[i].part);
        s = build_media(req, 1, &images, &err);
        assert_null(s);
        TU_FAILS_WITH(err, bad[i].error);
        json_decref(images);
    }
}

/* An Anthropic image block becomes an OpenAI image_url part (a data URI of its base64 source) between the text
 * blocks around it. */
static void test_anthropic_image(void **state) {
    json_t *req = json_loads("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                             "{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":\"image/png\","
                             "\"data\":\"iVBO\"}},{\"type\":\"text\",\"text\":\"b\"}]}]}", 0, NULL);
    json_t *m = NULL, *t = NULL;
    TU_OK(tern_chat_from_anthropic(req, &m, &t));
    char *s = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(s, "[{\"content\":[{\"text\":\"a\",\"type\":\"text\"},{\"image_url\":{\"url\":"
                           "\"data:image/png;base64,iVBO\"},\"type\":\"image_url\"},{\"text\":\"b\",\"type\":\"text\"}],"
                           "\"role\":\"user\"}]");
    free(s);
    json_decref(m);
    json_decref(t);
    json_decref(req);
}

static void test_validation_errors(void **state) {
    TU_FAILS_WITH(build("{}"), "messages: required");
    TU_FAILS_WITH(build("{\"messages\":{}}"), "messages: expected an array");
    TU_FAILS_WITH(build("{\"messages\":[]}"), "at least one message");
    TU_FAILS_WITH(build("{\"messages\":[3]}"), "messages[0]: expected a message object, got a number");
    TU_FAILS_WITH(build("{\"messages\":[{\"content\":\"x\"}]}"), "messages[0].role: expected a string");
    TU_FAILS_WITH(build("{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}"),
                  "messages[0].role: unknown role 'wizard'");
    TU_FAILS_WITH(build("{\"messages\":[{\"role\":\"user\"}]}"), "messages[0].content: a user message needs content");
    TU_FAILS_WITH(build("{\"messages\":[{\"role\":\"user\",\"content\":5}]}"),
                  "messages[0].content: expected a string or an array of content parts, got a number");
    TU_FAILS_WITH(build("{\"messages\":[{\"role\":\"user\",\"content\":[]}]}"), "array of content parts is empty");
    TU_FAILS_WITH(build("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{}}]}]}"),
                  "messages[0].content[0]: this model has no vision tower");
    TU_FAILS_WITH(build("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\"}]}]}"),
                  "messages[0].content[0]: this model has no audio tower");
    TU_FAILS_WITH(build("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"blob\"}]}]}"),
                  "unknown content part type 'blob'");
    TU_FAILS_WITH(build("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":1}]}]}"),
                  "messages[0].content[0].text: expected a string");
    TU_FAILS_WITH(build("{\"messages\":[{\"role\":\"assistant\"}]}"), "needs content or tool_calls");
    TU_FAILS_WITH(build("{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"tool_calls\":[{}]}]}"),
                  "only assistant messages carry tool calls");
    TU_FAILS_WITH(build("{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\","
                        "\"arguments\":\"{bad\"}}]}]}"),
                  "messages[0].tool_calls[0].function.arguments: not valid JSON");
    TU_FAILS_WITH(build("{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\","
                        "\"arguments\":\"[1]\"}}]}]}"),
                  "expected a JSON object, got an array");
    TU_FAILS_WITH(build("{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{}}]}]}"),
                  "messages[0].tool_calls[0].function.name: expected a non-empty string");
    TU_FAILS_WITH(build("{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"name\":7}]}"),
                  "messages[0].name: expected a string, got a number");
    TU_FAILS_WITH(build("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":{}}"),
                  "tools: expected an array");
    TU_FAILS_WITH(build("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"retrieval\"}]}"),
                  "tools[0].type: only \"function\" tools");
    TU_FAILS_WITH(build("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\","
                        "\"function\":{\"name\":\"\"}}]}"),
                  "tools[0].function.name: expected a non-empty string");
    TU_FAILS_WITH(build("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\","
                        "\"function\":{\"name\":\"f\",\"parameters\":[]}}]}"),
                  "tools[0].function.parameters: expected a JSON Schema object");
    TU_FAILS_WITH(build("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"chat_template_kwargs\":[]}"),
                  "chat_template_kwargs: expected an object");
}

static TERN_MUST_CHECK tern_err *anth(const char *req_json) {
    json_t *req = json_loads(req_json, 0, NULL);
    assert_non_null(req);
    json_t *m = NULL, *t = NULL;
    tern_err *err = tern_chat_from_anthropic(req, &m, &t);
    json_decref(m);
    json_decref(t);
    json_decref(req);
    return err;
}

static void test_anthropic_errors(void **state) {
    TU_FAILS_WITH(anth("{}"), "messages: required");
    TU_FAILS_WITH(anth("{\"messages\":[]}"), "at least one message");
    TU_FAILS_WITH(anth("{\"messages\":[{\"role\":\"system\",\"content\":\"x\"}]}"),
                  "messages[0].role: expected \"user\" or \"assistant\" (system text goes in the top-level");
    TU_FAILS_WITH(anth("{\"messages\":[{\"role\":\"user\"}]}"), "messages[0].content: expected a string or an array");
    TU_FAILS_WITH(anth("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_use\",\"id\":\"a\","
                       "\"name\":\"f\",\"input\":{}}]}]}"),
                  "'tool_use' blocks are not valid in a user message");
    TU_FAILS_WITH(anth("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"source\":{}}]}]}"),
                  "messages[0].content[0].source: expected");
    TU_FAILS_WITH(anth("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"source\":{"
                       "\"type\":\"base64\",\"media_type\":\"text/plain\",\"data\":\"AA==\"}}]}]}"),
                  "source.media_type: expected image/jpeg");
    TU_FAILS_WITH(anth("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"source\":{"
                       "\"type\":\"file\",\"file_id\":\"f\"}}]}]}"),
                  "'file' image sources are not supported");
    TU_FAILS_WITH(anth("{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"image\",\"source\":{"
                       "\"type\":\"url\",\"url\":\"https://x/y.png\"}}]}]}"),
                  "'image' blocks are not valid in an assistant message");
    TU_FAILS_WITH(anth("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\"}]}]}"),
                  "messages[0].content[0].tool_use_id: expected a string");
    TU_FAILS_WITH(anth("{\"system\":5,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}"),
                  "system: expected a string or an array of text blocks");
    TU_FAILS_WITH(anth("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"name\":\"f\"}]}"),
                  "tools[0].input_schema: expected a JSON Schema object");
    TU_FAILS_WITH(anth("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":"
                       "\"web_search_20250305\",\"name\":\"web_search\"}]}"),
                  "server tools ('web_search_20250305') are not supported");
}

static void test_tokenize_one_bos(void **state) {
    const char *mdir = MODEL;
    tern_model_opts mo = {.model_dir = mdir};
    tern_model *m;
    TU_OK(tern_model_load(&mo, &m));
    static const int32_t expected[] = {2,   105,    2364,   107,    3689,   563, 236743, 236778, 236862, 236778,
                                       236881, 106, 107,    105,    4368,   107, 100,    45518,  107,    101};
    const char *prompt = "<bos><|turn>user\nWhat is 2+2?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>";
    int32_t *ids;
    size_t n;
    TU_OK(tern_model_prompt_ids(m, prompt, strlen(prompt), &ids, &n));
    assert_int_equal(n, sizeof expected / sizeof *expected);
    assert_memory_equal(ids, expected, sizeof expected);
    tern_free(ids);
    /* A template that prints no BOS still gets exactly one, from the tokenizer. */
    TU_OK(tern_model_prompt_ids(m, prompt + 5, strlen(prompt) - 5, &ids, &n));
    assert_int_equal(n, sizeof expected / sizeof *expected);
    assert_memory_equal(ids, expected, sizeof expected);
    tern_free(ids);
    tern_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_chat),        cmocka_unit_test(test_thinking),
        cmocka_unit_test(test_tools_round_trip),  cmocka_unit_test(test_native_tool_responses),
        cmocka_unit_test(test_anthropic_system_and_thinking),
        cmocka_unit_test(test_validation_errors), cmocka_unit_test(test_anthropic_errors),
        cmocka_unit_test(test_audio_parts),
        cmocka_unit_test(test_image_parts),
        cmocka_unit_test(test_anthropic_image),
        cmocka_unit_test(test_tokenize_one_bos),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
