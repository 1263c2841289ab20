/* test_jinja_oracle.c — tern's Jinja renderer against the reference renderer,
 * @huggingface/jinja (run with node through tests/oracles/render_jinja.mjs):
 *  - every chat template in tests/data/templates/ with every conversation in
 *    tests/data/chat/ renders to the same bytes, or fails in both (a template's own
 *    raise_exception with the same message);
 *  - the JavaScript conventions the renderer reimplements in C — Unicode case mapping,
 *    number printing, string-to-number conversion — agree with node on every code point
 *    and on a few thousand numbers and strings;
 *  - `tern template` prints the same bytes, when the tern binary is built.
 * Needs node and tests/oracles/node_modules (npm ci in tests/oracles). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat/jinja.h"
#include "chat/jinja_internal.h"
#include "core/fileio.h"
#include "core/json_util.h"
#include "testutil.h"

static const char *source_dir(void) {
    const char *s = getenv("TERN_SOURCE_DIR");
    return s && *s ? s : ".";
}

/* Fails the test unless node and the reference renderer are installed. */
static void require_node(void) {
    char cmd[4200], *out = NULL;
    snprintf(cmd, sizeof cmd, "test -d '%s/tests/oracles/node_modules/@huggingface/jinja' && node --version 2>&1", source_dir());
    int rc = tu_run(cmd, &out);
    free(out);
    if (rc != 0)
        fail_msg("node or tests/oracles/node_modules/@huggingface/jinja is missing (run: npm ci --prefix tests/oracles)");
}

/* Sorted names in `dir` ending with `ext`; returns the count. */
static size_t list_files(const char *dir, const char *ext, char names[][256], size_t cap) {
    DIR *d = opendir(dir);
    if (!d)
        fail_msg("cannot open %s", dir);
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name), el = strlen(ext);
        if (l <= el || strcmp(de->d_name + l - el, ext) || l >= 256 || n == cap)
            continue;
        strcpy(names[n++], de->d_name);
    }
    closedir(d);
    qsort(names, n, 256, (int (*)(const void *, const void *))strcmp);
    return n;
}

/* Where tern deliberately goes beyond the reference, which throws: these pairs must fail
 * there and render here. */
static const struct {
    const char *tpl, *ctx, *why;
} beyond_reference[] = {
    {"meta-llama-Llama-3.1-8B-Instruct.jinja", "builtin_tools.json",
     "the template uses reject('equalto', ...), which the reference does not implement"},
};

static int is_beyond(const char *tpl, const char *ctx) {
    for (size_t i = 0; i < sizeof beyond_reference / sizeof beyond_reference[0]; i++)
        if (!strcmp(tpl, beyond_reference[i].tpl) && !strcmp(ctx, beyond_reference[i].ctx))
            return 1;
    return 0;
}

static char *read_or_null(const char *path, size_t *len) {
    char *buf = NULL;
    if (!tern_is_file(path))
        return NULL;
    TU_OK(tern_read_file(path, (size_t)64 << 20, &buf, len));
    return buf;
}

static void test_templates_match_reference(void **state) {
    require_node();
    static char tpls[64][256], ctxs[128][256];
    char tdir[4096], cdir[4096];
    snprintf(tdir, sizeof tdir, "%s", tu_testdata("templates"));
    snprintf(cdir, sizeof cdir, "%s/tests/data/chat", source_dir());
    size_t nt = list_files(tdir, ".jinja", tpls, 64), nc = list_files(cdir, ".json", ctxs, 128);
    assert_true(nt >= 6);
    assert_true(nc >= 8);
    char outdir[4096];
    snprintf(outdir, sizeof outdir, "%s", tu_tmpdir("jinja_oracle"));

    /* one node run renders everything */
    size_t cap = 8192 + (nt + nc) * 4400;
    char *cmd = malloc(cap);
    size_t at = (size_t)snprintf(cmd, cap, "node '%s/tests/oracles/render_jinja.mjs' --batch '%s'", source_dir(), outdir);
    for (size_t i = 0; i < nt; i++)
        at += (size_t)snprintf(cmd + at, cap - at, " '%s/%s'", tdir, tpls[i]);
    at += (size_t)snprintf(cmd + at, cap - at, " --");
    for (size_t i = 0; i < nc; i++)
        at += (size_t)snprintf(cmd + at, cap - at, " '%s/%s'", cdir, ctxs[i]);
    snprintf(cmd + at, cap - at, " 2>&1");
    char *log = NULL;
    int rc = tu_run(cmd, &log);
    if (rc != 0)
        fail_msg("the reference renderer failed (%d): %s", rc, log ? log : "");
    free(log);
    free(cmd);

    int failures = 0, same = 0, both_fail = 0, beyond = 0;
    for (size_t i = 0; i < nt; i++) {
        char path[4400], *src;
        size_t src_len;
        snprintf(path, sizeof path, "%s/%s", tdir, tpls[i]);
        TU_OK(tern_read_file(path, 1 << 20, &src, &src_len));
        tern_jinja *tpl;
        TU_OK(tern_jinja_compile(src, src_len, tpls[i], &tpl));
        for (size_t j = 0; j < nc; j++) {
            json_t *ctx;
            snprintf(path, sizeof path, "%s/%s", cdir, ctxs[j]);
            TU_OK(tern_json_load_file(path, 1 << 24, &ctx));
            char *ours = NULL;
            size_t ours_len = 0;
            tern_err *e = tern_jinja_render(tpl, ctx, NULL, &ours, &ours_len);
            json_decref(ctx);

            char base[600], ref_path[5200];
            snprintf(base, sizeof base, "%.*s__%.*s", (int)(strlen(tpls[i]) - 6), tpls[i], (int)(strlen(ctxs[j]) - 5), ctxs[j]);
            size_t ref_len = 0, err_len = 0;
            snprintf(ref_path, sizeof ref_path, "%s/%s.out", outdir, base);
            char *ref = read_or_null(ref_path, &ref_len);
            snprintf(ref_path, sizeof ref_path, "%s/%s.err", outdir, base);
            char *ref_err = read_or_null(ref_path, &err_len);
            if (!ref && !ref_err)
                fail_msg("%s: the reference wrote nothing", base);

            if (is_beyond(tpls[i], ctxs[j])) {
                if (!ref_err || e) {
                    print_error("%s: expected the reference to fail and tern to render (%s / %s)\n", base,
                                ref_err ? "reference failed" : "reference rendered", e ? tern_err_msg(e) : "tern rendered");
                    failures++;
                } else
                    beyond++;
            } else if (ref && !e) {
                if (ref_len == ours_len && !memcmp(ref, ours, ref_len))
                    same++;
                else {
                    size_t k = 0;
                    while (k < ref_len && k < ours_len && ref[k] == ours[k])
                        k++;
                    print_error("%s: output differs at byte %zu\n  reference: ...%.60s\n  tern:      ...%.60s\n", base, k,
                                ref + (k > 20 ? k - 20 : 0), ours + (k > 20 ? k - 20 : 0));
                    failures++;
                }
            } else if (ref && e) {
                print_error("%s: the reference renders, tern fails: %s\n", base, tern_err_msg(e));
                failures++;
            } else if (!e) {
                print_error("%s: the reference fails (%s), tern renders\n", base, ref_err);
                failures++;
            } else {
                /* both fail; a template's own raise_exception must carry the same message */
                const char *tag = strstr(e->msg, "raise_exception: ");
                if (tag && strcmp(tag + strlen("raise_exception: "), ref_err)) {
                    print_error("%s: different raise_exception messages\n  reference: %s\n  tern: %s\n", base, ref_err, e->msg);
                    failures++;
                } else
                    both_fail++;
            }
            tern_err_free(e);
            free(ours);
            free(ref);
            free(ref_err);
        }
        tern_jinja_free(tpl);
        free(src);
    }
    print_message("%zu templates x %zu conversations: %d identical, %d failing in both, %d beyond the reference\n", nt, nc,
                  same, both_fail, beyond);
    assert_int_equal(failures, 0);
    /* the comparison must mostly be of real renderings, not of shared failures */
    assert_true(same >= (int)(nt * nc * 3 / 4));
}

/* Runs a node script (given as a file) with arguments; returns its stdout. */
static char *run_node(const char *dir, const char *script, const char *args) {
    const char *path = tu_write(dir, "script.mjs", script, strlen(script));
    char cmd[8400], *out = NULL;
    snprintf(cmd, sizeof cmd, "node '%s' %s", path, args);
    int rc = tu_run(cmd, &out);
    if (rc != 0)
        fail_msg("node failed (%d) running %s", rc, script);
    return out;
}

/* toUpperCase / toLowerCase of every code point, against jt_upper_cp / jt_lower_cp. */
static void test_case_mapping_matches_javascript(void **state) {
    require_node();
    const char *dir = tu_tmpdir("jinja_case");
    char *out = run_node(dir,
                         "const lines = [];\n"
                         "for (let cp = 0; cp <= 0x10FFFF; cp++) {\n"
                         "  if (cp >= 0xD800 && cp <= 0xDFFF) continue;\n"
                         "  const s = String.fromCodePoint(cp), u = s.toUpperCase(), l = s.toLowerCase();\n"
                         "  if (u === s && l === s) continue;\n"
                         "  const cps = (t) => [...t].map((c) => c.codePointAt(0).toString(16)).join(',');\n"
                         "  lines.push(cp.toString(16) + ' ' + cps(u) + ' ' + cps(l));\n"
                         "}\n"
                         "process.stdout.write(lines.join('\\n') + '\\n');\n",
                         "");
    /* "cp upper lower" lines, ascending; every code point not listed maps to itself */
    typedef struct {
        uint32_t cp, up[3], lo[3];
        int nu, nl;
    } mapping;
    size_t cap = 4096, n = 0;
    mapping *m = malloc(cap * sizeof *m);
    for (char *p = out; p && *p;) {
        if (n == cap)
            m = realloc(m, (cap *= 2) * sizeof *m);
        mapping *e = &m[n++];
        e->cp = (uint32_t)strtoul(p, &p, 16);
        e->nu = e->nl = 0;
        do
            e->up[e->nu++] = (uint32_t)strtoul(p + 1, &p, 16);
        while (*p == ',' && e->nu < 3);
        do
            e->lo[e->nl++] = (uint32_t)strtoul(p + 1, &p, 16);
        while (*p == ',' && e->nl < 3);
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    assert_true(n > 2000);
    int failures = 0;
    size_t k = 0;
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF)
            continue;
        uint32_t want_u[3] = {cp}, want_l[3] = {cp}, got[3];
        int nu = 1, nl = 1;
        if (k < n && m[k].cp == cp) {
            memcpy(want_u, m[k].up, sizeof want_u);
            memcpy(want_l, m[k].lo, sizeof want_l);
            nu = m[k].nu;
            nl = m[k].nl;
            k++;
        }
        int g = jt_upper_cp(cp, got);
        if ((g != nu || memcmp(got, want_u, (size_t)g * sizeof got[0])) && failures++ < 10)
            print_error("U+%04X: toUpperCase differs\n", (unsigned)cp);
        if (cp == 0x3A3) /* Σ depends on its neighbours (final sigma): the filter tests cover it */
            continue;
        g = jt_lower_cp(cp, got);
        if ((g != nl || memcmp(got, want_l, (size_t)g * sizeof got[0])) && failures++ < 10)
            print_error("U+%04X: toLowerCase differs\n", (unsigned)cp);
    }
    assert_int_equal(k, n);
    free(m);
    free(out);
    assert_int_equal(failures, 0);
}

/* Number.prototype.toString, Number(string), parseInt and parseFloat against node. */
static void test_numbers_match_javascript(void **state) {
    require_node();
    const char *dir = tu_tmpdir("jinja_numbers");
    /* doubles across magnitudes, written exactly */
    enum { N = 3000 };
    static double vals[N];
    uint64_t rng = 0x243F6A8885A308D3ull;
    for (int i = 0; i < N; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        double mant = (double)(rng >> 11) / 9007199254740992.0; /* [0, 1) */
        int exp10 = (int)(rng % 61) - 30;
        switch (i % 5) {
        case 0: vals[i] = mant * pow(10, exp10); break;
        case 1: vals[i] = floor(mant * 1e6) / 64; break;
        case 2: vals[i] = (double)(int64_t)(rng >> 8) * ((rng & 1) ? -1 : 1); break;
        case 3: vals[i] = floor(mant * 1000) * pow(10, exp10 % 25); break;
        default: vals[i] = -mant * pow(2, exp10 * 3); break;
        }
    }
    char *buf = malloc(N * 32);
    size_t at = 0;
    for (int i = 0; i < N; i++)
        at += (size_t)sprintf(buf + at, "%.17g\n", vals[i]);
    tu_write(dir, "numbers.txt", buf, at);
    free(buf);
    char args[4200];
    snprintf(args, sizeof args, "'%s/numbers.txt'", dir);
    char *out = run_node(dir,
                         "import { readFileSync } from 'node:fs';\n"
                         "const v = readFileSync(process.argv[2], 'utf8').trim().split('\\n').map(Number);\n"
                         "process.stdout.write(v.map(String).join('\\n') + '\\n');\n",
                         args);
    int failures = 0;
    char *line = out;
    for (int i = 0; i < N && line; i++) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        char mine[48];
        jt_num_str(vals[i], mine);
        if (strcmp(mine, line) && failures++ < 10)
            print_error("%.17g: JavaScript prints %s, tern %s\n", vals[i], line, mine);
        line = nl ? nl + 1 : NULL;
    }
    free(out);

    /* string -> number conversions (JSON array of strings in, three numbers per string out) */
    static const char *const strs[] = {"", " ", "12", " 12 ", "1.5", "-1.5e3", "+7", "0x1F", "0X1f", "0o17", "0b101", "-0x10",
                                       "1e", "1e+", ".5", "5.", ".", "Infinity", "-Infinity", "+Infinity", "infinity", "NaN",
                                       "abc", "12abc", "\302\24042\342\200\250" /* no-break space, 42, line separator */, "\t\n12\r", "1_000", "00012", "0.1e-2x",
                                       "  -.75e+1 tail", "9007199254740993", "1e400", "-0", "3.14.15"};
    size_t ns = sizeof strs / sizeof strs[0];
    json_t *arr = json_array();
    for (size_t i = 0; i < ns; i++)
        json_array_append_new(arr, json_string(strs[i]));
    char *js = json_dumps(arr, 0);
    json_decref(arr);
    tu_write(dir, "strings.json", js, strlen(js));
    free(js);
    snprintf(args, sizeof args, "'%s/strings.json'", dir);
    out = run_node(dir,
                   "import { readFileSync } from 'node:fs';\n"
                   "const s = JSON.parse(readFileSync(process.argv[2], 'utf8'));\n"
                   "const f = (x) => Object.is(x, -0) ? '-0' : String(x);\n"
                   "process.stdout.write(s.map((x) => [Number(x), parseInt(x, 10), parseFloat(x)].map(f).join(' ')).join('\\n') + '\\n');\n",
                   args);
    line = out;
    for (size_t i = 0; i < ns && line; i++) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        double mine[3] = {jt_str_to_num(strs[i], strlen(strs[i])), jt_parse_int(strs[i], strlen(strs[i])),
                          jt_parse_float(strs[i], strlen(strs[i]))};
        char got[160];
        size_t g = 0;
        for (int k = 0; k < 3; k++) {
            char t[48];
            if (mine[k] == 0 && signbit(mine[k]))
                strcpy(t, "-0");
            else
                jt_num_str(mine[k], t);
            g += (size_t)snprintf(got + g, sizeof got - g, "%s%s", k ? " " : "", t);
        }
        if (strcmp(got, line) && failures++ < 20)
            print_error("'%s': JavaScript gives %s, tern %s\n", strs[i], line, got);
        line = nl ? nl + 1 : NULL;
    }
    free(out);
    assert_int_equal(failures, 0);
}

/* `tern template` writes the same bytes as the reference. */
static void test_cli_matches_reference(void **state) {
    const char *bin = tu_tern_bin();
    if (!bin || access(bin, X_OK) != 0) {
        print_message("tern binary not built (%s); skipping the CLI check\n", bin ? bin : "TERN_BIN unset");
        skip();
    }
    require_node();
    char tpl[4200], ctx[4200], cmd[20000], *ours = NULL, *ref = NULL;
    snprintf(tpl, sizeof tpl, "%s", tu_testdata("templates/google-gemma-4-31B-it.jinja"));
    snprintf(ctx, sizeof ctx, "%s/tests/data/chat/tools.json", source_dir());
    snprintf(cmd, sizeof cmd, "'%s' template '%s' '%s'", bin, tpl, ctx);
    assert_int_equal(tu_run(cmd, &ours), 0);
    snprintf(cmd, sizeof cmd, "node '%s/tests/oracles/render_jinja.mjs' '%s' '%s'", source_dir(), tpl, ctx);
    assert_int_equal(tu_run(cmd, &ref), 0);
    assert_non_null(ours);
    assert_non_null(ref);
    assert_string_equal(ours, ref);
    free(ours);
    free(ref);
    /* errors go to stderr with the location, and the exit status is 1 */
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("jinja_cli"));
    snprintf(cmd, sizeof cmd, "printf '{{ x y }}' > '%s/bad.jinja' && '%s' template '%s/bad.jinja' '%s' 2>&1", dir, bin, dir, ctx);
    char *err = NULL;
    int rc = tu_run(cmd, &err);
    assert_int_not_equal(rc, 0);
    assert_non_null(err);
    assert_non_null(strstr(err, "bad.jinja:1:6: expected '}}'"));
    free(err);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_templates_match_reference),
        cmocka_unit_test(test_case_mapping_matches_javascript),
        cmocka_unit_test(test_numbers_match_javascript),
        cmocka_unit_test(test_cli_matches_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
