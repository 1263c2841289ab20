/* test_server_tls.c — `tern serve --ssl-cert-file/--ssl-key-file` with a certificate the test makes (openssl, self-
 * signed for 127.0.0.1), keys from --api-key and --api-key-file: the official `openai` client over HTTPS
 * (tests/server/openai_tls.mjs), plain HTTP refused on the TLS port, /metrics public only when asked, and the errors a
 * user can act on (a key without its certificate, a certificate that is not one). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "server_util.h"

static char dir[4096], cert[4200], key[4200], keys[4200];

static int setup(void **state) {
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("server-tls"));
    snprintf(cert, sizeof cert, "%s/cert.pem", dir);
    snprintf(key, sizeof key, "%s/key.pem", dir);
    snprintf(keys, sizeof keys, "%s/keys.txt", dir);
    char cmd[20000];
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey rsa:2048 -nodes -keyout '%s' -out '%s' -days 2 -subj /CN=127.0.0.1 "
             "-addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1",
             key, cert);
    if (tu_run(cmd, NULL) != 0) {
        print_error("openssl could not make a certificate\n");
        return -1;
    }
    FILE *f = fopen(keys, "w");
    fputs("# the team's keys\nkey-two  \n\n  key-three # the CI's\n", f);
    fclose(f);
    return 0;
}

static void run_node(int port, int metrics_public) {
    char cmd[20000], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "NODE_EXTRA_CA_CERTS='%s' node '%s/tests/server/openai_tls.mjs' https://127.0.0.1:%d key-one key-three %d "
             "2>&1",
             cert, getenv("TERN_SOURCE_DIR") ? getenv("TERN_SOURCE_DIR") : ".", port, metrics_public);
    int rc = tu_run(cmd, &out);
    if (rc != 0 || !strstr(out, "ok "))
        print_error("%s\n", out ? out : "(no output)");
    assert_int_equal(rc, 0);
    printf("  openai_tls.mjs: %s", out);
    free(out);
}

static void test_https_with_keys(void **state) {
    char args[20000];
    for (int pub = 0; pub < 2; pub++) {
        snprintf(args, sizeof args, "--ssl-cert-file '%s' --ssl-key-file '%s' --api-key key-one --api-key-file '%s'%s",
                 cert, key, keys, pub ? " --metrics-public" : "");
        ts_server S;
        ts_start(&S, args);
        assert_non_null(strstr(S.ready, "at https://"));
        run_node(S.port, pub);
        if (!pub) { /* plain HTTP on the TLS port gets no HTTP answer */
            ts_resp r;
            ts_http(S.port, "GET", "/health", NULL, NULL, &r);
            assert_true(r.status != 200);
            ts_resp_free(&r);
        }
        ts_stop(&S);
    }
}

static void test_tls_errors(void **state) {
    char cmd[20000], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' serve '%s' --port 0 --ssl-key-file '%s' 2>&1", tu_tern_bin(), ts_model(), key);
    assert_int_equal(tu_run(cmd, &out), 2);
    assert_non_null(strstr(out, "needs both --ssl-cert-file and --ssl-key-file"));
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' serve '%s' --port 0 --ssl-cert-file '%s' --ssl-key-file '%s' 2>&1", tu_tern_bin(),
             ts_model(), keys, key);
    assert_int_equal(tu_run(cmd, &out), 1);
    assert_non_null(strstr(out, "certificate or private key was refused"));
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' serve '%s' --port 0 --api-key-file '%s/none.txt' 2>&1", tu_tern_bin(), ts_model(),
             dir);
    assert_int_equal(tu_run(cmd, &out), 2);
    assert_non_null(strstr(out, "none.txt"));
    free(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_https_with_keys), cmocka_unit_test(test_tls_errors)};
    return cmocka_run_group_tests(tests, setup, NULL);
}
