/* test_hub.c — the pieces of `tern get` that need no network: SHA-256 and SHA-1 against FIPS 180 vectors and
 * against themselves fed in pieces, model names (ORG/NAME[@REV][:TAG]), which GGUF file and mmproj a tag picks,
 * the hub's file list (and what it refuses), and finding a model in a cache laid out by hand. The downloads
 * themselves are tested against a stand-in hub by tests/cli/hub_get.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hub/hub.h"
#include "hub/hub_internal.h"
#include "hub/sha.h"
#include "testutil.h"

static void digest(int sha1, const void *p, size_t n, char hex[65]) {
    hub_sha s;
    hub_sha_init(&s, sha1);
    hub_sha_feed(&s, p, n);
    hub_sha_hex(&s, hex);
}

static void test_sha_vectors(void **state) {
    (void)state;
    char hex[65];
    digest(0, "abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    digest(0, "", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    digest(0, two, strlen(two), hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    digest(1, "abc", 3, hex);
    assert_string_equal(hex, "a9993e364706816aba3e25717850c26c9cd0d89d");
    digest(1, two, strlen(two), hex);
    assert_string_equal(hex, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
    /* A million 'a's, fed in uneven pieces. */
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    for (int sha1 = 0; sha1 < 2; sha1++) {
        hub_sha s;
        hub_sha_init(&s, sha1);
        for (size_t off = 0, step = 1; off < 1000000; off += step, step = step * 7 % 1013 + 1)
            hub_sha_feed(&s, a + off, off + step > 1000000 ? 1000000 - off : step);
        hub_sha_hex(&s, hex);
        assert_string_equal(hex, sha1 ? "34aa973cd4c4daa4f61eeb2bdbad27316534016f"
                                      : "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    }
    free(a);
    /* A git blob id: "blob 6\0hello\n" -> the id git hash-object gives. */
    digest(1, "blob 6\0hello\n", 13, hex);
    assert_string_equal(hex, "ce013625030ba8dba906f756967f9e9ca394464a");
}

static void test_ref_parse(void **state) {
    (void)state;
    hub_ref r;
    assert_true(hub_ref_parse("google/gemma-4-e2b-it", &r));
    assert_string_equal(r.repo, "google/gemma-4-e2b-it");
    assert_string_equal(r.revision, "main");
    assert_string_equal(r.tag, "");
    assert_true(hub_ref_parse("unsloth/gemma-4-E2B-it-GGUF:Q4_K_M", &r));
    assert_string_equal(r.repo, "unsloth/gemma-4-E2B-it-GGUF");
    assert_string_equal(r.tag, "Q4_K_M");
    assert_true(hub_ref_parse("org/name@v1.0:q8_0", &r));
    assert_string_equal(r.revision, "v1.0");
    assert_string_equal(r.tag, "q8_0");
    assert_true(hub_ref_parse("org/name@refs/pr/3", &r));
    assert_string_equal(r.revision, "refs/pr/3");
    const char *bad[] = {"name", "/name", "org/", "a/b/c", "../x", "./a", "org/..", "org/na me", "org/name@",
                         "org/name:", "org/name@../../etc", "org/name:Q4/x", "org/name@a:b:c", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_false(hub_ref_parse(bad[i], &r));
}

static void test_pick_gguf(void **state) {
    (void)state;
    const char *files[] = {"README.md", "gemma-4-e2b-it-Q8_0.gguf", "gemma-4-e2b-it-Q4_K_M.gguf",
                           "gemma-4-e2b-it-Q4_K_S.gguf", "mmproj-gemma-4-e2b-it-BF16.gguf",
                           "mmproj-gemma-4-e2b-it-F16.gguf", "big/big-Q6_K-00002-of-00002.gguf",
                           "big/big-Q6_K-00001-of-00002.gguf"};
    size_t n = sizeof files / sizeof *files;
    assert_int_equal(hub_pick_gguf(files, n, ""), 2);      /* Q4_K_M by default */
    assert_int_equal(hub_pick_gguf(files, n, "q8_0"), 1);  /* case-insensitive */
    assert_int_equal(hub_pick_gguf(files, n, "Q4_K"), -1); /* a word, not a prefix of Q4_K_M */
    assert_int_equal(hub_pick_gguf(files, n, "Q6_K"), 7);  /* a split model's first part */
    assert_int_equal(hub_pick_gguf(files, n, "F16"), -1);  /* mmproj files are never the model */
    assert_int_equal(hub_pick_mmproj(files, n, ""), 5);    /* F16 before BF16 */
    assert_int_equal(hub_pick_mmproj(files, n, "BF16"), 4);
    assert_true(hub_split_siblings(files[7], files[6]));
    assert_false(hub_split_siblings(files[7], files[1]));
    const char *plain[] = {"a.gguf", "b.gguf"};
    assert_int_equal(hub_pick_gguf(plain, 2, ""), 0); /* no Q4_K_M: the first */
    assert_int_equal(hub_pick_mmproj(plain, 2, ""), -1);
}

static void test_listing_parse(void **state) {
    (void)state;
    const char *ok = "{\"sha\":\"0123456789abcdef0123456789abcdef01234567\",\"siblings\":["
                     "{\"rfilename\":\"config.json\",\"size\":12,\"blobId\":\"ce013625030ba8dba906f756967f9e9ca394464a\"},"
                     "{\"rfilename\":\"sub/model.safetensors\",\"size\":1,\"blobId\":\"x\",\"lfs\":{\"sha256\":"
                     "\"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\",\"size\":99}}]}";
    hub_listing l;
    assert_null(hub_listing_parse(ok, strlen(ok), "o/n", &l));
    assert_string_equal(l.commit, "0123456789abcdef0123456789abcdef01234567");
    assert_int_equal(l.n, 2);
    assert_int_equal(l.f[0].lfs, 0);
    assert_int_equal(l.f[1].lfs, 1);
    assert_int_equal(l.f[1].size, 99); /* the LFS size, not the pointer's */
    hub_listing_free(&l);
    const char *bad_paths[] = {"../x", "/etc/passwd", "a//b", "a/./b", "", "a/"};
    for (size_t i = 0; i < sizeof bad_paths / sizeof *bad_paths; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "{\"sha\":\"0123456789abcdef0123456789abcdef01234567\",\"siblings\":[{\"rfilename\":\"%s\","
                 "\"size\":1,\"blobId\":\"ce013625030ba8dba906f756967f9e9ca394464a\"}]}",
                 bad_paths[i]);
        tern_err *e = hub_listing_parse(text, strlen(text), "o/n", &l);
        assert_non_null(e);
        assert_non_null(strstr(tern_err_msg(e), "o/n's file list has an entry tern cannot use"));
        tern_err_free(e);
    }
    const char *no_commit = "{\"sha\":\"main\",\"siblings\":[]}";
    tern_err *e = hub_listing_parse(no_commit, strlen(no_commit), "o/n", &l);
    assert_non_null(e);
    tern_err_free(e);
    const char *bad_etag = "{\"sha\":\"0123456789abcdef0123456789abcdef01234567\",\"siblings\":[{\"rfilename\":"
                           "\"a\",\"size\":1,\"blobId\":\"ZZ013625030ba8dba906f756967f9e9ca394464a\"}]}";
    e = hub_listing_parse(bad_etag, strlen(bad_etag), "o/n", &l);
    assert_non_null(e);
    tern_err_free(e);
}

/* A cache made by hand as huggingface_hub lays it out: found by name, offline; a dangling link is not complete. */
static void test_find_in_cache(void **state) {
    (void)state;
    char root[200], p[2048];
    snprintf(root, sizeof root, "%s/hub-cache-%d", getenv("TERN_TMP") ? getenv("TERN_TMP") : "/tmp", (int)getpid());
    const char *commit = "0123456789abcdef0123456789abcdef01234567";
    snprintf(p, sizeof p, "mkdir -p %s/models--o--n/blobs %s/models--o--n/refs %s/models--o--n/snapshots/%s && "
                          "echo '{}' > %s/models--o--n/blobs/aaaa && printf %s > %s/models--o--n/refs/main && "
                          "ln -s ../../blobs/aaaa %s/models--o--n/snapshots/%s/config.json",
             root, root, root, commit, root, commit, root, root, commit);
    assert_int_equal(system(p), 0);
    hub_ref r;
    hub_model m;
    assert_true(hub_ref_parse("o/n", &r));
    assert_null(hub_find(root, &r, &m));
    snprintf(p, sizeof p, "%s/models--o--n/snapshots/%s", root, commit);
    assert_string_equal(m.path, p);
    assert_null(m.mmproj);
    hub_model_free(&m);
    assert_true(hub_ref_parse("o/n@0123456789abcdef0123456789abcdef01234567", &r)); /* by commit, no ref needed */
    assert_null(hub_find(root, &r, &m));
    hub_model_free(&m);
    assert_true(hub_ref_parse("o/n@v2", &r));
    tern_err *e = hub_find(root, &r, &m);
    assert_non_null(e);
    assert_int_equal(e->code, TERN_ENOTFOUND);
    tern_err_free(e);
    snprintf(p, sizeof p, "rm %s/models--o--n/blobs/aaaa", root); /* the link now dangles */
    assert_int_equal(system(p), 0);
    assert_true(hub_ref_parse("o/n", &r));
    e = hub_find(root, &r, &m);
    assert_non_null(e);
    tern_err_free(e);
    hub_entry *list;
    size_t n;
    assert_null(hub_list(root, &list, &n));
    assert_int_equal(n, 1);
    assert_string_equal(list[0].repo, "o/n");
    assert_string_equal(list[0].revision, "main");
    free(list);
    assert_null(hub_remove(root, "o/n"));
    e = hub_remove(root, "o/n");
    assert_non_null(e);
    tern_err_free(e);
    rmdir(root);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha_vectors),   cmocka_unit_test(test_ref_parse),
        cmocka_unit_test(test_pick_gguf),     cmocka_unit_test(test_listing_parse),
        cmocka_unit_test(test_find_in_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
