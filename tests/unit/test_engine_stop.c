/* test_engine_stop.c — stop strings matched on text across token boundaries: held back while they
 * might still match, excluded from the output when they do, released when they cannot. */
#include <stdlib.h>
#include <string.h>

#include "engine/stop_text.h"
#include "testutil.h"

typedef struct run {
    char out[512];
    size_t n;
    int stop;     /* index found, or -1 */
    int at_piece; /* piece at which it was found */
} run;

/* Feeds pieces until a stop is found; appends every release; flushes when none is found. */
static run feed(const char *const *stops, int n_stops, const char *const *pieces, int n_pieces, int flush) {
    size_t lens[8];
    for (int i = 0; i < n_stops; i++)
        lens[i] = strlen(stops[i]);
    tern_stop_text st;
    memset(&st, 0, sizeof st);
    tern_stop_text_init(&st, stops, lens, n_stops);
    run r = {.stop = -1, .at_piece = -1};
    for (int i = 0; i < n_pieces && r.stop < 0; i++) {
        const char *out;
        size_t len;
        TU_OK(tern_stop_text_push(&st, pieces[i], strlen(pieces[i]), &out, &len, &r.stop));
        memcpy(r.out + r.n, out, len);
        r.n += len;
        if (r.stop >= 0)
            r.at_piece = i;
    }
    if (r.stop < 0 && flush) {
        const char *out;
        size_t len;
        TU_OK(tern_stop_text_flush(&st, &out, &len));
        memcpy(r.out + r.n, out, len);
        r.n += len;
    }
    r.out[r.n] = 0;
    tern_stop_text_free(&st);
    return r;
}

static void test_split_across_pieces(void **state) {
    const char *stops[] = {"END"};
    const char *pieces[] = {"abc", "E", "N", "Dxyz", "more"};
    run r = feed(stops, 1, pieces, 5, 1);
    assert_int_equal(r.stop, 0);
    assert_int_equal(r.at_piece, 3);
    assert_string_equal(r.out, "abc"); /* neither the stop string nor what follows it */

    const char *tag[] = {"</s>"};
    const char *p2[] = {"foo<", "/", "s>bar"};
    r = feed(tag, 1, p2, 3, 1);
    assert_int_equal(r.stop, 0);
    assert_string_equal(r.out, "foo");
}

static void test_held_back_then_released(void **state) {
    const char *stops[] = {"END"};
    size_t lens[] = {3};
    tern_stop_text st;
    memset(&st, 0, sizeof st);
    tern_stop_text_init(&st, stops, lens, 1);
    const char *out;
    size_t len;
    int stop;
    TU_OK(tern_stop_text_push(&st, "abE", 3, &out, &len, &stop));
    assert_int_equal(stop, -1);
    assert_int_equal(len, 2); /* "E" might start "END": held */
    assert_memory_equal(out, "ab", 2);
    TU_OK(tern_stop_text_push(&st, "N", 1, &out, &len, &stop));
    assert_int_equal(len, 0); /* "EN" still might */
    TU_OK(tern_stop_text_push(&st, "x", 1, &out, &len, &stop));
    assert_int_equal(stop, -1);
    assert_int_equal(len, 3); /* "ENx" cannot: all of it comes out */
    assert_memory_equal(out, "ENx", 3);
    TU_OK(tern_stop_text_push(&st, "EN", 2, &out, &len, &stop));
    assert_int_equal(len, 0);
    TU_OK(tern_stop_text_flush(&st, &out, &len)); /* generation ended: the held text is output */
    assert_int_equal(len, 2);
    assert_memory_equal(out, "EN", 2);
    tern_stop_text_free(&st);
}

static void test_several_stops(void **state) {
    /* The earliest occurrence wins, whichever string it is. */
    const char *stops[] = {"bc", "abcd"};
    const char *pieces[] = {"x", "abcd"};
    run r = feed(stops, 2, pieces, 2, 1);
    assert_int_equal(r.stop, 1);
    assert_string_equal(r.out, "x");
    /* A longer candidate holds back text that a shorter one would not. */
    const char *stops2[] = {"###", "#!"};
    const char *p2[] = {"a#", "#", "b"};
    r = feed(stops2, 2, p2, 3, 1);
    assert_int_equal(r.stop, -1);
    assert_string_equal(r.out, "a##b");
    /* A stop string inside a single piece. */
    const char *p3[] = {"hello #! world"};
    r = feed(stops2, 2, p3, 1, 1);
    assert_int_equal(r.stop, 1);
    assert_string_equal(r.out, "hello ");
}

static void test_utf8_and_passthrough(void **state) {
    const char *stops[] = {"\xc3\xa9!"}; /* "é!" */
    const char *pieces[] = {"caf", "\xc3\xa9", "!", "tail"};
    run r = feed(stops, 1, pieces, 4, 1);
    assert_int_equal(r.stop, 0);
    assert_string_equal(r.out, "caf");
    const char *p2[] = {"caf", "\xc3\xa9", "s"};
    r = feed(stops, 1, p2, 3, 0);
    assert_string_equal(r.out, "caf\xc3\xa9s"); /* released whole characters, never half of é */
    /* No stop strings: every piece passes straight through. */
    const char *p3[] = {"a", "", "bc"};
    r = feed(NULL, 0, p3, 3, 1);
    assert_int_equal(r.stop, -1);
    assert_string_equal(r.out, "abc");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_across_pieces),
        cmocka_unit_test(test_held_back_then_released),
        cmocka_unit_test(test_several_stops),
        cmocka_unit_test(test_utf8_and_passthrough),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
