/* test_server_replies.c — how the chat, Responses and Anthropic endpoints turn a model's events into replies, driven with
 * scripted events (no engine: the demo model's random weights never write tool calls): Gemma 4 thinking,
 * content and tool-call markup split across tokens the way a real model emits them become reasoning_content /
 * content / tool_calls (OpenAI chat), reasoning / message / function_call items (Responses) and thinking / text /
 * tool_use blocks (Anthropic), streaming and not, with the
 * right finish and stop reasons and failure frames. The streams produced are then replayed over HTTP to the
 * official `openai` and `@anthropic-ai/sdk` clients (tests/server/replay_sdk.mjs), whose own accumulators must
 * rebuild the same tool calls. */
#include "server/server_internal.h"
#include "server_util.h"

/* A reply as Gemma 4 writes it, one piece per token (markers are single special tokens). */
static const char *const PIECES[] = {"<|channel>",  "thought\n", "Let me ",   "check.", "<channel|>",
                                     "Checking the ", "weather.", "<|tool_call>", "call:get_weather{", "city:",
                                     "<|\"|>",      "Paris",     "<|\"|>",    ",days:3}", "<tool_call|>"};
#define N_PIECES (int)(sizeof PIECES / sizeof *PIECES)

static tern_server *fake_server(void) {
    tern_server *s = calloc(1, sizeof *s);
    s->model_id = strdup("m");
    s->id_salt = 12345;
    return s;
}

static void free_server(tern_server *s) {
    free(s->model_id);
    free(s);
}

/* Replays PIECES[0, n) then DONE(finish, stop_string) through ops/ctx; returns the bytes written (streaming). */
static void replay(const srv_gen_ops *ops, void *ctx, int n, tern_finish finish, int stop_string, sbuf *out) {
    for (int i = 0; i < n; i++) {
        tern_event ev = {.kind = TERN_EV_TOKEN, .token = 1000 + i, .index = i, .text = PIECES[i],
                         .text_len = strlen(PIECES[i]), .stop_token = -1, .stop_string = -1};
        TU_OK(ops->on_token(ctx, &ev, out));
    }
    tern_event done = {.kind = TERN_EV_DONE, .token = -1, .text = "", .finish = finish, .stop_token = -1,
                       .stop_string = stop_string};
    done.usage.prompt_tokens = 30;
    done.usage.cached_tokens = 10;
    done.usage.completion_tokens = n + 1;
    TU_OK(ops->on_done(ctx, &done, out));
}

/* Where the recorded replies go, for the SDK replay at the end (made once: tu_tmpdir empties a directory). */
static char REPLIES[4096];

static int setup(void **state) {
    snprintf(REPLIES, sizeof REPLIES, "%s", tu_tmpdir("replies"));
    return 0;
}

static void save(const char *name, const char *data, size_t len) { tu_write(REPLIES, name, data, len); }

static void test_chat_stream(void **state) {
    tern_server *s = fake_server();
    const srv_gen_ops *ops = srv_chat_ops();
    void *c = srv_chat_run_new(s, 1, 0, 1);
    sbuf out = {0};
    replay(ops, c, N_PIECES, TERN_FINISH_STOP, -1, &out);
    json_t *chunks = ts_sse(out.p, NULL);
    size_t n = json_array_size(chunks);
    assert_string_equal(ts_str(chunks, "0.choices.0.delta.role"), "assistant");
    char *reasoning = ts_sse_concat(chunks, "reasoning_content");
    char *content = ts_sse_concat(chunks, "content");
    assert_string_equal(reasoning, "Let me check.");
    assert_string_equal(content, "Checking the weather.");
    free(reasoning);
    free(content);
    json_t *call = NULL;
    for (size_t i = 0; i < n; i++)
        if (ts_get(json_array_get(chunks, i), "choices.0.delta.tool_calls")) {
            assert_null(call); /* one chunk carries the whole call */
            call = ts_get(json_array_get(chunks, i), "choices.0.delta.tool_calls.0");
        }
    assert_non_null(call);
    assert_int_equal(ts_int(call, "index"), 0);
    assert_true(!strncmp(ts_str(call, "id"), "call_", 5));
    assert_string_equal(ts_str(call, "type"), "function");
    assert_string_equal(ts_str(call, "function.name"), "get_weather");
    assert_string_equal(ts_str(call, "function.arguments"), "{\"city\":\"Paris\",\"days\":3}");
    json_t *last = json_array_get(chunks, n - 2);
    assert_string_equal(ts_str(last, "choices.0.finish_reason"), "tool_calls");
    assert_int_equal(ts_int(last, "usage.prompt_tokens_details.cached_tokens"), 10);
    assert_string_equal(json_string_value(json_array_get(chunks, n - 1)), "[DONE]");
    save("chat.sse", out.p, out.len);
    json_decref(chunks);
    sbuf_free(&out);
    ops->free_ctx(c);
    free_server(s);
}

static void test_chat_non_stream(void **state) {
    tern_server *s = fake_server();
    const srv_gen_ops *ops = srv_chat_ops();
    void *c = srv_chat_run_new(s, 0, 0, 1);
    replay(ops, c, N_PIECES, TERN_FINISH_STOP, -1, NULL);
    json_t *v = srv_chat_response(c);
    assert_string_equal(ts_str(v, "object"), "chat.completion");
    assert_string_equal(ts_str(v, "choices.0.message.content"), "Checking the weather.");
    assert_string_equal(ts_str(v, "choices.0.message.reasoning_content"), "Let me check.");
    assert_string_equal(ts_str(v, "choices.0.message.tool_calls.0.function.name"), "get_weather");
    assert_string_equal(ts_str(v, "choices.0.message.tool_calls.0.function.arguments"), "{\"city\":\"Paris\",\"days\":3}");
    assert_null(ts_get(v, "choices.0.message.tool_calls.0.index"));
    assert_string_equal(ts_str(v, "choices.0.finish_reason"), "tool_calls");
    assert_int_equal(ts_int(v, "usage.total_tokens"), 30 + N_PIECES + 1);
    char *text = json_dumps(v, JSON_COMPACT);
    save("chat.json", text, strlen(text));
    free(text);
    json_decref(v);
    ops->free_ctx(c);

    /* Only a call: content is null. Without tool parsing: the markup is content and the finish is "stop". */
    c = srv_chat_run_new(s, 0, 0, 1);
    tern_event ev = {.kind = TERN_EV_TOKEN, .text = "<|tool_call>call:f{}<tool_call|>", .text_len = 32};
    TU_OK(ops->on_token(c, &ev, NULL));
    tern_event done = {.kind = TERN_EV_DONE, .text = "", .finish = TERN_FINISH_STOP, .stop_string = -1};
    TU_OK(ops->on_done(c, &done, NULL));
    v = srv_chat_response(c);
    assert_true(json_is_null(ts_get(v, "choices.0.message.content")));
    assert_string_equal(ts_str(v, "choices.0.message.tool_calls.0.function.arguments"), "{}");
    json_decref(v);
    ops->free_ctx(c);
    c = srv_chat_run_new(s, 0, 0, 0);
    TU_OK(ops->on_token(c, &ev, NULL));
    TU_OK(ops->on_done(c, &done, NULL));
    v = srv_chat_response(c);
    assert_string_equal(ts_str(v, "choices.0.message.content"), "<|tool_call>call:f{}<tool_call|>");
    assert_string_equal(ts_str(v, "choices.0.finish_reason"), "stop");
    json_decref(v);
    ops->free_ctx(c);
    /* Cut off by max_tokens inside the reasoning: "length", the reasoning kept. */
    c = srv_chat_run_new(s, 0, 0, 1);
    replay(ops, c, 3, TERN_FINISH_LENGTH, -1, NULL);
    v = srv_chat_response(c);
    assert_string_equal(ts_str(v, "choices.0.finish_reason"), "length");
    assert_string_equal(ts_str(v, "choices.0.message.reasoning_content"), "Let me ");
    assert_string_equal(ts_str(v, "choices.0.message.content"), "");
    json_decref(v);
    ops->free_ctx(c);
    free_server(s);
}

static void test_stream_failure_frames(void **state) {
    tern_server *s = fake_server();
    sbuf out = {0};
    void *c = srv_chat_run_new(s, 1, 0, 1);
    srv_chat_ops()->on_fail(c, 503, "the server is shutting down", &out);
    json_t *chunks = ts_sse(out.p, NULL);
    assert_string_equal(ts_str(chunks, "0.error.message"), "the server is shutting down");
    assert_string_equal(ts_str(chunks, "0.error.type"), "server_unavailable");
    assert_string_equal(json_string_value(json_array_get(chunks, 1)), "[DONE]");
    json_decref(chunks);
    srv_chat_ops()->free_ctx(c);
    sbuf_clear(&out);
    c = srv_messages_run_new(s, 1, 1, 30, NULL, 0);
    srv_messages_ops()->on_fail(c, 500, "generation failed: boom", &out);
    json_t *events;
    chunks = ts_sse(out.p, &events);
    assert_string_equal(json_string_value(json_array_get(events, 0)), "error");
    assert_string_equal(ts_str(chunks, "0.type"), "error");
    assert_string_equal(ts_str(chunks, "0.error.type"), "api_error");
    assert_string_equal(ts_str(chunks, "0.error.message"), "generation failed: boom");
    json_decref(chunks);
    json_decref(events);
    srv_messages_ops()->free_ctx(c);
    sbuf_free(&out);
    free_server(s);
}

static void test_messages_stream(void **state) {
    tern_server *s = fake_server();
    const srv_gen_ops *ops = srv_messages_ops();
    void *c = srv_messages_run_new(s, 1, 1, 30, NULL, 0);
    sbuf out = {0};
    srv_messages_start(c, &out);
    replay(ops, c, N_PIECES, TERN_FINISH_STOP, -1, &out);
    json_t *events;
    json_t *data = ts_sse(out.p, &events);
    static const char *const want[] = {
        "message_start",       "ping",          "content_block_start", "content_block_delta", "content_block_delta",
        "content_block_stop",  "content_block_start", "content_block_delta", "content_block_delta",
        "content_block_stop",  "content_block_start", "content_block_delta", "content_block_stop", "message_delta",
        "message_stop"};
    assert_int_equal(json_array_size(events), sizeof want / sizeof *want);
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        assert_string_equal(json_string_value(json_array_get(events, i)), want[i]);
        assert_string_equal(ts_str(json_array_get(data, i), "type"), want[i]);
    }
    assert_string_equal(ts_str(data, "2.content_block.type"), "thinking");
    assert_string_equal(ts_str(data, "3.delta.thinking"), "Let me ");
    assert_string_equal(ts_str(data, "6.content_block.type"), "text");
    assert_int_equal(ts_int(data, "6.index"), 1);
    assert_string_equal(ts_str(data, "8.delta.text"), "weather.");
    assert_string_equal(ts_str(data, "10.content_block.type"), "tool_use");
    assert_string_equal(ts_str(data, "10.content_block.name"), "get_weather");
    assert_true(!strncmp(ts_str(data, "10.content_block.id"), "toolu_", 6));
    assert_string_equal(ts_str(data, "11.delta.type"), "input_json_delta");
    assert_string_equal(ts_str(data, "11.delta.partial_json"), "{\"city\":\"Paris\",\"days\":3}");
    assert_int_equal(ts_int(data, "12.index"), 2);
    assert_string_equal(ts_str(data, "13.delta.stop_reason"), "tool_use");
    assert_int_equal(ts_int(data, "13.usage.output_tokens"), N_PIECES + 1);
    assert_int_equal(ts_int(data, "13.usage.cache_read_input_tokens"), 10);
    save("messages.sse", out.p, out.len);
    json_decref(events);
    json_decref(data);
    sbuf_free(&out);
    ops->free_ctx(c);
    free_server(s);
}

static void test_messages_non_stream(void **state) {
    tern_server *s = fake_server();
    const srv_gen_ops *ops = srv_messages_ops();
    void *c = srv_messages_run_new(s, 0, 1, 30, NULL, 0);
    replay(ops, c, N_PIECES, TERN_FINISH_STOP, -1, NULL);
    json_t *v = srv_messages_response(c);
    assert_int_equal(json_array_size(ts_get(v, "content")), 3);
    assert_string_equal(ts_str(v, "content.0.type"), "thinking");
    assert_string_equal(ts_str(v, "content.0.thinking"), "Let me check.");
    assert_string_equal(ts_str(v, "content.1.text"), "Checking the weather.");
    assert_string_equal(ts_str(v, "content.2.type"), "tool_use");
    assert_string_equal(ts_str(v, "content.2.input.city"), "Paris");
    assert_int_equal(ts_int(v, "content.2.input.days"), 3);
    assert_string_equal(ts_str(v, "stop_reason"), "tool_use");
    assert_true(json_is_null(ts_get(v, "stop_sequence")));
    assert_int_equal(ts_int(v, "usage.input_tokens"), 20); /* 30 prompt tokens, 10 of them cached */
    char *text = json_dumps(v, JSON_COMPACT);
    save("messages.json", text, strlen(text));
    free(text);
    json_decref(v);
    ops->free_ctx(c);
    /* A stop sequence is reported by name; max_tokens as such. */
    char *stops[] = {"END", "STOP"};
    c = srv_messages_run_new(s, 0, 1, 30, stops, 2);
    replay(ops, c, 4, TERN_FINISH_STOP, 1, NULL);
    v = srv_messages_response(c);
    assert_string_equal(ts_str(v, "stop_reason"), "stop_sequence");
    assert_string_equal(ts_str(v, "stop_sequence"), "STOP");
    json_decref(v);
    ops->free_ctx(c);
    c = srv_messages_run_new(s, 0, 1, 30, NULL, 0);
    replay(ops, c, 6, TERN_FINISH_LENGTH, -1, NULL);
    v = srv_messages_response(c);
    assert_string_equal(ts_str(v, "stop_reason"), "max_tokens");
    assert_string_equal(ts_str(v, "content.1.text"), "Checking the ");
    json_decref(v);
    ops->free_ctx(c);
    free_server(s);
}

/* Responses: the same reply as output items — reasoning, message, function_call in the order written — and as the
 * Responses event stream, each event named as its data's type and numbered from 0. */
static void test_responses_stream(void **state) {
    tern_server *s = fake_server();
    const srv_gen_ops *ops = srv_responses_ops();
    void *c = srv_responses_run_new(s, 1, 1);
    sbuf out = {0};
    srv_responses_start(c, &out);
    replay(ops, c, N_PIECES, TERN_FINISH_STOP, -1, &out);
    json_t *events;
    json_t *data = ts_sse(out.p, &events);
    size_t n = json_array_size(data);
    assert_int_equal(json_array_size(events), n);
    static const char *const want[] = {
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        "response.reasoning_text.delta", "response.reasoning_text.delta", "response.reasoning_text.done",
        "response.content_part.done", "response.output_item.done", "response.output_item.added",
        "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done", "response.completed"};
    assert_int_equal(n, sizeof want / sizeof *want);
    for (size_t i = 0; i < n; i++) {
        json_t *d = json_array_get(data, i);
        assert_string_equal(json_string_value(json_array_get(events, i)), want[i]);
        assert_string_equal(ts_str(d, "type"), want[i]);
        assert_int_equal(ts_int(d, "sequence_number"), (long long)i);
    }
    assert_string_equal(ts_str(data, "6.text"), "Let me check.");
    assert_string_equal(ts_str(data, "13.text"), "Checking the weather.");
    assert_int_equal(ts_int(data, "13.output_index"), 1);
    assert_string_equal(ts_str(data, "18.arguments"), "{\"city\":\"Paris\",\"days\":3}");
    assert_string_equal(ts_str(data, "20.response.output_text"), "Checking the weather.");
    assert_int_equal(ts_int(data, "20.response.usage.input_tokens_details.cached_tokens"), 10);
    assert_true(ts_int(data, "20.response.usage.output_tokens_details.reasoning_tokens") >= 2);
    save("responses.sse", out.p, out.len);
    json_decref(data);
    json_decref(events);
    sbuf_free(&out);
    ops->free_ctx(c);
    free_server(s);
}

static void test_responses_non_stream(void **state) {
    tern_server *s = fake_server();
    const srv_gen_ops *ops = srv_responses_ops();
    void *c = srv_responses_run_new(s, 0, 1);
    replay(ops, c, N_PIECES, TERN_FINISH_STOP, -1, NULL);
    json_t *v = srv_responses_response(c);
    assert_string_equal(ts_str(v, "status"), "completed");
    assert_string_equal(ts_str(v, "output.0.type"), "reasoning");
    assert_string_equal(ts_str(v, "output.0.content.0.text"), "Let me check.");
    assert_string_equal(ts_str(v, "output.1.type"), "message");
    assert_string_equal(ts_str(v, "output.1.content.0.text"), "Checking the weather.");
    assert_string_equal(ts_str(v, "output.2.type"), "function_call");
    assert_string_equal(ts_str(v, "output.2.name"), "get_weather");
    assert_true(!strncmp(ts_str(v, "output.2.call_id"), "call_", 5));
    assert_string_equal(ts_str(v, "output.2.arguments"), "{\"city\":\"Paris\",\"days\":3}");
    assert_int_equal(ts_int(v, "usage.total_tokens"), 30 + N_PIECES + 1);
    char *text = json_dumps(v, JSON_COMPACT);
    save("responses.json", text, strlen(text));
    free(text);
    ops->free_ctx(c);
    /* Cut off inside the reasoning: incomplete, the reasoning item kept, no message. */
    c = srv_responses_run_new(s, 0, 1);
    replay(ops, c, 3, TERN_FINISH_LENGTH, -1, NULL);
    v = srv_responses_response(c);
    assert_string_equal(ts_str(v, "status"), "incomplete");
    assert_string_equal(ts_str(v, "incomplete_details.reason"), "max_output_tokens");
    assert_string_equal(ts_str(v, "output.0.content.0.text"), "Let me ");
    assert_int_equal(json_array_size(ts_get(v, "output")), 1);
    assert_string_equal(ts_str(v, "output_text"), "");
    ops->free_ctx(c);
    /* A failure mid-stream: an error event, then response.failed. */
    sbuf out = {0};
    c = srv_responses_run_new(s, 1, 1);
    ops->on_fail(c, 503, "the server is shutting down", &out);
    json_t *events, *data = ts_sse(out.p, &events);
    assert_string_equal(json_string_value(json_array_get(events, 0)), "error");
    assert_string_equal(ts_str(data, "0.message"), "the server is shutting down");
    assert_string_equal(json_string_value(json_array_get(events, 1)), "response.failed");
    assert_string_equal(ts_str(data, "1.response.status"), "failed");
    json_decref(data);
    json_decref(events);
    sbuf_free(&out);
    ops->free_ctx(c);
    free_server(s);
}

/* The official clients read the replies recorded above (served by replay_sdk.mjs). */
static void test_sdk_replay(void **state) {
    char *out = NULL;
    const char *src = getenv("TERN_SOURCE_DIR") ? getenv("TERN_SOURCE_DIR") : ".";
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "node '%s/tests/server/replay_sdk.mjs' '%s' 2>&1", src, REPLIES);
    int rc = tu_run(cmd, &out);
    if (rc != 0)
        print_error("%s\n", out ? out : "");
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "ok "));
    free(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_stream),           cmocka_unit_test(test_chat_non_stream),
        cmocka_unit_test(test_stream_failure_frames), cmocka_unit_test(test_messages_stream),
        cmocka_unit_test(test_messages_non_stream),   cmocka_unit_test(test_responses_stream),
        cmocka_unit_test(test_responses_non_stream),  cmocka_unit_test(test_sdk_replay),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
