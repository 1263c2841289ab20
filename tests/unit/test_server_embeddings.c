/* test_server_embeddings.c — /v1/embeddings end to end: the official `openai` npm client on the synthetic tiny model
 * (tests/server/openai_embeddings.mjs), the route's metrics and a batch beside chat requests, and a sanity check of
 * what the vectors mean on the trained demo model (models/demo, trained on WordNet's definitions): for a fixed list
 * of definitions, a definition is closer (cosine) to a related word's definition than to an unrelated one's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/sbuf.h"
#include "testutil.h"
#include "server_util.h"

static ts_server S;

static int setup(void **state) {
    ts_start(&S, "--parallel 3 --ctx 2048");
    return 0;
}

static int teardown(void **state) {
    ts_stop(&S);
    return 0;
}

static void test_node_embeddings(void **state) {
    char *out = NULL;
    int rc = ts_node(&S, "openai_embeddings.mjs", NULL, &out);
    if (rc != 0 || !strstr(out, "ok "))
        print_error("%s\n", out ? out : "(no output)");
    assert_int_equal(rc, 0);
    printf("  openai_embeddings.mjs: %s", out);
    free(out);
}

/* More inputs than rows, beside a chat request: every vector arrives, and the chat reply too. */
static void test_batch_beside_chat(void **state) {
    sbuf body = {0};
    sbuf_adds(&body, "{\"input\":[");
    for (int i = 0; i < 10; i++)
        sbuf_printf(&body, "%s\"sentence number %d\"", i ? "," : "", i);
    sbuf_adds(&body, "]}");
    ts_resp r, c;
    int fd = ts_connect(S.port);
    const char *chat = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":30}";
    char req[512];
    int n = snprintf(req, sizeof req,
                     "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     strlen(chat), chat);
    ts_send(fd, req, (size_t)n);
    ts_post(S.port, "/v1/embeddings", body.p, &r);
    assert_int_equal(r.status, 200);
    json_t *v = json_loads(r.body, 0, NULL);
    assert_int_equal(json_array_size(json_object_get(v, "data")), 10);
    size_t len = 0;
    char *raw = ts_read_all(fd, &len);
    close(fd);
    ts_parse_response(raw, len, &c);
    assert_int_equal(c.status, 200);
    ts_resp_free(&c);
    json_decref(v);
    ts_resp_free(&r);
    sbuf_free(&body);
    assert_true(ts_metric(S.port, "tern_http_responses_total{endpoint=\"embeddings\",code=\"200\"}") >= 1);
}

/* Definitions in the demo's training style: each anchor with a related word's definition and an unrelated word's
 * of the same form and length, so that only what the words mean tells the two apart. */
static const char *const TRIPLES[][3] = {
    {"A dog is a domestic animal that barks.", "A puppy is a young dog.", "A pebble is a small stone."},
    {"A king is a man who rules a country.", "A queen is the wife of a king.", "A spoon is a tool for eating soup."},
    {"Rain is water that falls from the clouds.", "Snow is frozen water that falls from the sky.",
     "Iron is a hard metal that is used to make tools."},
    {"Bread is food made from flour and baked.", "Wheat is a grain that is ground into flour.",
     "Silk is a cloth that is made by worms."},
    {"A sword is a weapon with a long blade.", "A spear is a weapon with a sharp point.",
     "A table is a piece of furniture with legs."},
    {"Gold is a precious yellow metal.", "Silver is a precious white metal.", "Grass is a green plant of fields."},
    {"A sheep is an animal with thick wool.", "A lamb is a young sheep.", "A harp is a musical instrument."},
    {"A ship is a large vessel that sails the sea.", "A boat is a small vessel for crossing water.",
     "A house is a building where people live."},
    {"A mountain is a very high hill.", "A valley is low land between hills.", "A candle is a stick of wax with a wick."},
    {"Wine is a drink made from grapes.", "A vineyard is a field of grape vines.", "A ladder is a set of steps for climbing."},
    {"A father is a man who has a child.", "A mother is a woman who has a child.", "A hammer is a tool for hitting nails."},
    {"The sun is the star that lights the day.", "The moon shines in the sky at night.",
     "A pillow is a soft cushion for the head."},
};
#define N_TRIPLES (sizeof TRIPLES / sizeof *TRIPLES)

static double cosine(const json_t *a, const json_t *b) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < json_array_size(a); i++) {
        double x = json_real_value(json_array_get(a, i)), y = json_real_value(json_array_get(b, i));
        ab += x * y, aa += x * x, bb += y * y;
    }
    return ab / sqrt(aa * bb);
}

static void test_demo_related_closer(void **state) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/models/demo", getenv("TERN_SOURCE_DIR") ? getenv("TERN_SOURCE_DIR") : ".");
    ts_server demo;
    ts_start_model(&demo, dir, "--parallel 2");
    json_t *input = json_array();
    for (size_t t = 0; t < N_TRIPLES; t++)
        for (int k = 0; k < 3; k++)
            json_array_append_new(input, json_string(TRIPLES[t][k]));
    json_t *req = json_pack("{s:o}", "input", input);
    char *body = json_dumps(req, JSON_COMPACT);
    ts_resp r;
    ts_post(demo.port, "/v1/embeddings", body, &r);
    ts_stop(&demo);
    assert_int_equal(r.status, 200);
    json_t *v = json_loads(r.body, 0, NULL);
    json_t *data = json_object_get(v, "data");
    assert_int_equal(json_array_size(data), 3 * N_TRIPLES);
    int wins = 0;
    double sum_rel = 0, sum_unrel = 0;
    for (size_t t = 0; t < N_TRIPLES; t++) {
        const json_t *e[3];
        for (int k = 0; k < 3; k++)
            e[k] = json_object_get(json_array_get(data, 3 * t + (size_t)k), "embedding");
        double rel = cosine(e[0], e[1]), unrel = cosine(e[0], e[2]);
        printf("  %-58.58s related %.4f unrelated %.4f\n", TRIPLES[t][0], rel, unrel);
        wins += rel > unrel;
        sum_rel += rel, sum_unrel += unrel;
    }
    printf("  related closer in %d of %zu; mean cosine related %.4f, unrelated %.4f\n", wins, N_TRIPLES,
           sum_rel / N_TRIPLES, sum_unrel / N_TRIPLES);
    assert_true(wins >= (int)N_TRIPLES - 2);
    assert_true(sum_rel > sum_unrel);
    json_decref(v);
    json_decref(req);
    free(body);
    ts_resp_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_embeddings),
        cmocka_unit_test(test_batch_beside_chat),
        cmocka_unit_test(test_demo_related_closer),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
