/* test_multipart.c — the multipart/form-data parser behind POST /v1/audio/transcriptions: a body byte for byte as
 * the openai npm client (undici FormData) sends it, with binary audio holding NULs and boundary look-alikes; the
 * Python client's (httpx) and curl's shapes; Content-Type boundary extraction variants; preamble, epilogue, LF-only
 * line endings, transport padding; empty parts; and every malformed case with its message, including every cut-short
 * prefix of a valid body. Bodies are parsed from exact-size heap copies so a sanitizer build catches any read past
 * the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/multipart.h"
#include "testutil.h"

/* ---- helpers -------------------------------------------------------------------------------------------------- */

typedef struct buf {
    unsigned char d[1 << 15];
    size_t n;
} buf;

static void put(buf *b, const void *p, size_t n) {
    assert_true(b->n + n <= sizeof b->d);
    if (n)
        memcpy(b->d + b->n, p, n);
    b->n += n;
}
static void put_str(buf *b, const char *s) { put(b, s, strlen(s)); }

typedef struct parsed {
    unsigned char *body; /* the exact-size copy the parts point into */
    srv_part parts[8];
    size_t n;
} parsed;

static TERN_MUST_CHECK tern_err *parse_max(parsed *p, const void *body, size_t len, const char *boundary, size_t max_parts) {
    assert_true(max_parts <= 8);
    p->body = malloc(len ? len : 1);
    assert_non_null(p->body);
    if (len)
        memcpy(p->body, body, len);
    p->n = 99;
    tern_err *err = srv_multipart_parse(p->body, len, boundary, p->parts, max_parts, &p->n);
    if (err)
        assert_int_equal(p->n, 0);
    return err;
}
static TERN_MUST_CHECK tern_err *parse(parsed *p, const void *body, size_t len, const char *boundary) {
    return parse_max(p, body, len, boundary, 8);
}
static TERN_MUST_CHECK tern_err *parse_str(parsed *p, const char *body, const char *boundary) {
    return parse(p, body, strlen(body), boundary);
}
static void parsed_free(parsed *p) {
    free(p->body);
    p->body = NULL;
}

static void expect_str(const char *s, size_t n, const char *want) {
    assert_non_null(s);
    if (n != strlen(want) || memcmp(s, want, n) != 0) {
        print_error("expected \"%s\", got \"%.*s\"\n", want, (int)n, s);
        fail();
    }
}
static void expect_text(const parsed *p, size_t i, const char *name, const char *value) {
    assert_true(i < p->n);
    expect_str(p->parts[i].name, p->parts[i].name_len, name);
    expect_str((const char *)p->parts[i].data, p->parts[i].len, value);
    assert_null(p->parts[i].filename);
    assert_null(p->parts[i].content_type);
}

/* ---- the clients' bodies ---------------------------------------------------------------------------------------- */

#define UNDICI_BOUNDARY "----formdata-undici-0123456789"

/* Audio bytes that try hard to look like a delimiter: NULs, "\r\n--", a prefix of the boundary, the whole boundary
 * followed by a character that is neither "--" nor a line end, the boundary followed by spaces and junk, a bare CR
 * after the boundary, and a last byte that is a CR (the data's, not the delimiter's). */
static size_t hostile_audio(unsigned char *out) {
    static const char *const chunks[] = {
        "RIFF\x24\x01\x02\x03WAVEfmt ",
        "\r\n--",
        "\r\n--" UNDICI_BOUNDARY "X",
        "\n--" UNDICI_BOUNDARY "_",
        "\r\n--" UNDICI_BOUNDARY "  junk\r\n",
        "\r\n--" UNDICI_BOUNDARY "\r\r",
        "\r\n--" UNDICI_BOUNDARY "-x",
        "\r\n------formdata-undici-012345678", /* the boundary less its last character */
        "\r\n-" UNDICI_BOUNDARY "\r\n",
        "\r\n\r\n",
        "data",
    };
    size_t n = 0;
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
        size_t k = strlen(chunks[i]);
        memcpy(out + n, chunks[i], k);
        n += k;
        for (int z = 0; z < 3; z++)
            out[n++] = (unsigned char)(z == 1 ? 0xff : 0x00);
    }
    out[n++] = '\r';
    return n;
}

/* What undici's FormData serializer writes (lib/web/fetch/body.js): "--boundary\r\n", headers, "\r\n", the value,
 * "\r\n" per entry, then "--boundary--\r\n"; a Blob gets a filename and its type as Content-Type. */
static void undici_body(buf *b, const unsigned char *audio, size_t audio_len) {
    b->n = 0;
    put_str(b, "--" UNDICI_BOUNDARY "\r\n"
               "Content-Disposition: form-data; name=\"file\"; filename=\"speech.wav\"\r\n"
               "Content-Type: audio/wav\r\n"
               "\r\n");
    put(b, audio, audio_len);
    put_str(b, "\r\n"
               "--" UNDICI_BOUNDARY "\r\n"
               "Content-Disposition: form-data; name=\"model\"\r\n"
               "\r\n"
               "whisper-1\r\n"
               "--" UNDICI_BOUNDARY "\r\n"
               "Content-Disposition: form-data; name=\"response_format\"\r\n"
               "\r\n"
               "verbose_json\r\n"
               "--" UNDICI_BOUNDARY "--\r\n");
}

static void test_undici_body(void **state) {
    unsigned char audio[1024];
    size_t audio_len = hostile_audio(audio);
    assert_non_null(memchr(audio, '\0', audio_len));
    buf b;
    undici_body(&b, audio, audio_len);

    char boundary[SRV_MULTIPART_BOUNDARY_CAP];
    TU_OK(srv_multipart_boundary("multipart/form-data; boundary=" UNDICI_BOUNDARY, boundary, sizeof boundary));
    assert_string_equal(boundary, UNDICI_BOUNDARY);

    parsed p;
    TU_OK(parse(&p, b.d, b.n, boundary));
    assert_int_equal(p.n, 3);
    const srv_part *f = &p.parts[0];
    expect_str(f->name, f->name_len, "file");
    expect_str(f->filename, f->filename_len, "speech.wav");
    expect_str(f->content_type, f->content_type_len, "audio/wav");
    assert_int_equal(f->len, audio_len);
    assert_memory_equal(f->data, audio, audio_len);
    expect_text(&p, 1, "model", "whisper-1");
    expect_text(&p, 2, "response_format", "verbose_json");

    assert_ptr_equal(srv_multipart_find(p.parts, p.n, "file"), &p.parts[0]);
    assert_ptr_equal(srv_multipart_find(p.parts, p.n, "response_format"), &p.parts[2]);
    assert_null(srv_multipart_find(p.parts, p.n, "language"));
    assert_null(srv_multipart_find(p.parts, p.n, "fil"));
    assert_null(srv_multipart_find(p.parts, p.n, "FILE")); /* field names are case-sensitive */
    parsed_free(&p);

    /* The same upload with a small real WAV: every byte value, the audio ending in "\r\n". */
    unsigned char all[258];
    for (int i = 0; i < 256; i++)
        all[i] = (unsigned char)i;
    all[256] = '\r';
    all[257] = '\n';
    undici_body(&b, all, sizeof all);
    TU_OK(parse(&p, b.d, b.n, UNDICI_BOUNDARY));
    assert_int_equal(p.n, 3);
    assert_int_equal(p.parts[0].len, sizeof all);
    assert_memory_equal(p.parts[0].data, all, sizeof all);
    parsed_free(&p);
}

/* The openai Python client (httpx): fields first, then files; a hex boundary; the optional fields of the API. */
static void test_httpx_body(void **state) {
    const char *body = "--9b7c5e1f0a2d4c6e8f1a3b5c7d9e0f21\r\n"
                       "Content-Disposition: form-data; name=\"model\"\r\n\r\n"
                       "whisper-1\r\n"
                       "--9b7c5e1f0a2d4c6e8f1a3b5c7d9e0f21\r\n"
                       "Content-Disposition: form-data; name=\"prompt\"\r\n\r\n"
                       "Line one.\r\nLine two; with \"quotes\".\r\n"
                       "--9b7c5e1f0a2d4c6e8f1a3b5c7d9e0f21\r\n"
                       "Content-Disposition: form-data; name=\"language\"\r\n\r\n"
                       "fr\r\n"
                       "--9b7c5e1f0a2d4c6e8f1a3b5c7d9e0f21\r\n"
                       "Content-Disposition: form-data; name=\"temperature\"\r\n\r\n"
                       "0.2\r\n"
                       "--9b7c5e1f0a2d4c6e8f1a3b5c7d9e0f21\r\n"
                       "Content-Disposition: form-data; name=\"file\"; filename=\"my talk; take 2.mp3\"\r\n"
                       "Content-Type: audio/mpeg\r\n\r\n"
                       "ID3\x04\r\n--\r\n"
                       "--9b7c5e1f0a2d4c6e8f1a3b5c7d9e0f21--\r\n";
    parsed p;
    TU_OK(parse_str(&p, body, "9b7c5e1f0a2d4c6e8f1a3b5c7d9e0f21"));
    assert_int_equal(p.n, 5);
    expect_text(&p, 0, "model", "whisper-1");
    expect_text(&p, 1, "prompt", "Line one.\r\nLine two; with \"quotes\".");
    expect_text(&p, 2, "language", "fr");
    expect_text(&p, 3, "temperature", "0.2");
    expect_str(p.parts[4].filename, p.parts[4].filename_len, "my talk; take 2.mp3");
    expect_str(p.parts[4].content_type, p.parts[4].content_type_len, "audio/mpeg");
    expect_str((const char *)p.parts[4].data, p.parts[4].len, "ID3\x04\r\n--");
    parsed_free(&p);
}

/* Header and parameter names in any case, token values, OWS, extra headers, filename*, a Content-Type with
 * parameters (kept whole), an empty filename as browsers send for an empty file input. */
static void test_headers_and_params(void **state) {
    const char *body = "--b\r\n"
                       "X-Whatever: form-data; name=\"decoy\"\r\n"
                       "CONTENT-DISPOSITION :  Form-Data ;NAME = file ; FileName=clip.wav;filename*=UTF-8''x.wav  \r\n"
                       "content-type: audio/wav; rate=16000\r\n"
                       "Content-Transfer-Encoding: binary\r\n"
                       "\r\n"
                       "abc\r\n"
                       "--b\r\n"
                       "Content-Disposition: form-data; filename=\"\"; name=\"upload\"; name=\"second\"\r\n"
                       "\r\n"
                       "\r\n"
                       "--b--";
    parsed p;
    TU_OK(parse_str(&p, body, "b"));
    assert_int_equal(p.n, 2);
    expect_str(p.parts[0].name, p.parts[0].name_len, "file");
    expect_str(p.parts[0].filename, p.parts[0].filename_len, "clip.wav");
    expect_str(p.parts[0].content_type, p.parts[0].content_type_len, "audio/wav; rate=16000");
    expect_str((const char *)p.parts[0].data, p.parts[0].len, "abc");
    expect_str(p.parts[1].name, p.parts[1].name_len, "upload"); /* the first name wins */
    assert_non_null(p.parts[1].filename);
    assert_int_equal(p.parts[1].filename_len, 0);
    assert_int_equal(p.parts[1].len, 0);
    parsed_free(&p);
}

/* ---- Content-Type ------------------------------------------------------------------------------------------------ */

static void expect_boundary(const char *ct, const char *want) {
    char b[SRV_MULTIPART_BOUNDARY_CAP];
    tern_err *e = srv_multipart_boundary(ct, b, sizeof b);
    if (e) {
        print_error("%s: unexpected error: %s\n", ct, tern_err_msg(e));
        tern_err_free(e);
        fail();
    }
    assert_string_equal(b, want);
}
static void expect_no_boundary(const char *ct, const char *needle) {
    char b[SRV_MULTIPART_BOUNDARY_CAP];
    memset(b, 'x', sizeof b);
    TU_FAILS_WITH(srv_multipart_boundary(ct, b, sizeof b), needle);
    assert_int_equal(b[0], '\0');
}

static void test_boundary_extraction(void **state) {
    expect_boundary("multipart/form-data; boundary=----formdata-undici-0123456789", "----formdata-undici-0123456789");
    expect_boundary("multipart/form-data; boundary=\"----WebKitFormBoundary7MA4YWxkTrZu0gW\"",
                    "----WebKitFormBoundary7MA4YWxkTrZu0gW");
    expect_boundary("MULTIPART/FORM-DATA; BOUNDARY=AbC", "AbC"); /* the value keeps its case */
    expect_boundary("Multipart/Form-Data;boundary=x", "x");
    expect_boundary("  multipart/form-data ; charset=utf-8; boundary=abc ; foo=\"b;ar\"", "abc");
    expect_boundary("multipart/form-data; foo=\"boundary=nope\"; boundary=yes", "yes");
    expect_boundary("multipart/form-data; boundary = \"with space'()+_,-./:=?\"", "with space'()+_,-./:=?");
    expect_boundary("multipart/form-data; boundary=first; boundary=second", "first");
    expect_boundary("multipart/form-data; boundary===============7330845974216740156==",
                    "==============7330845974216740156==");
    char b70[80], ct[128];
    memset(b70, 'z', 70);
    b70[70] = '\0';
    snprintf(ct, sizeof ct, "multipart/form-data; boundary=%s", b70);
    expect_boundary(ct, b70);

    const char *need = "Content-Type must be multipart/form-data with a boundary";
    expect_no_boundary(NULL, need);
    expect_no_boundary("", need);
    expect_no_boundary("multipart/form-data", need);
    expect_no_boundary("multipart/form-data; charset=utf-8", "no boundary parameter");
    expect_no_boundary("multipart/form-data; boundaryx=abc", "no boundary parameter");
    expect_no_boundary("multipart/form-data; boundary", "no boundary parameter");
    expect_no_boundary("application/json", "got \"application/json\"");
    expect_no_boundary("multipart/mixed; boundary=abc", need);
    expect_no_boundary("multipart/form-datax; boundary=abc", need);
    expect_no_boundary("multipart/form-data; boundary=\"abc", "no closing quote");
    expect_no_boundary("multipart/form-data; boundary=", "1 to 70");
    expect_no_boundary("multipart/form-data; boundary=\"\"", "1 to 70");
    expect_no_boundary("multipart/form-data; boundary=\"abc \"", "ends with a space");
    expect_no_boundary("multipart/form-data; boundary=ab\x01z", "control");
    snprintf(ct, sizeof ct, "multipart/form-data; boundary=%sz", b70);
    expect_no_boundary(ct, "71 characters");

    char small[4];
    TU_FAILS_WITH(srv_multipart_boundary("multipart/form-data; boundary=abcd", small, sizeof small), "does not fit");
    TU_OK(srv_multipart_boundary("multipart/form-data; boundary=abc", small, sizeof small));
    assert_string_equal(small, "abc");
}

/* ---- line endings, preamble, epilogue, padding ------------------------------------------------------------------ */

static void test_preamble_epilogue_padding(void **state) {
    const char *body = "This is the preamble.  It is to be ignored, though it\r\n"
                       "is a handy place for composition agents to include an\r\n"
                       "explanatory note.  --bnd is not a boundary mid-line.\r\n"
                       "--bndx is not one either\r\n"
                       "--bnd \t \r\n"
                       "Content-Disposition: form-data; name=\"model\"\r\n"
                       "\r\n"
                       "whisper-1\r\n"
                       "--bnd--  \r\n"
                       "This is the epilogue. --bnd\r\nContent-Disposition: form-data; name=\"evil\"\r\n\r\nx\r\n";
    parsed p;
    TU_OK(parse_str(&p, body, "bnd"));
    assert_int_equal(p.n, 1);
    expect_text(&p, 0, "model", "whisper-1");
    parsed_free(&p);

    /* A leading CRLF before the first delimiter (an empty preamble line). */
    TU_OK(parse_str(&p, "\r\n--bnd\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--bnd--", "bnd"));
    assert_int_equal(p.n, 1);
    expect_text(&p, 0, "a", "1");
    parsed_free(&p);
}

static void test_lf_only(void **state) {
    const char *body = "preamble\n"
                       "--XyZ\n"
                       "Content-Disposition: form-data; name=\"model\"\n"
                       "\n"
                       "whisper-1\n"
                       "--XyZ\n"
                       "Content-Disposition: form-data; name=\"file\"; filename=\"a.raw\"\n"
                       "Content-Type: application/octet-stream\n"
                       "\n"
                       "\n--XyZa\n--Xy\r\r" /* look-alikes, then "\r\r": only the CR before the LF is the delimiter's */
                       "\n--XyZ\n"
                       "Content-Disposition: form-data; name=\"mixed\"\r\n" /* CRLF and LF in one body */
                       "\n"
                       "v\r\n"
                       "--XyZ--\n";
    parsed p;
    TU_OK(parse_str(&p, body, "XyZ"));
    assert_int_equal(p.n, 3);
    expect_text(&p, 0, "model", "whisper-1");
    expect_str((const char *)p.parts[1].data, p.parts[1].len, "\n--XyZa\n--Xy\r");
    expect_str(p.parts[1].content_type, p.parts[1].content_type_len, "application/octet-stream");
    expect_text(&p, 2, "mixed", "v");
    parsed_free(&p);
}

/* ---- empty parts ------------------------------------------------------------------------------------------------- */

static void test_empty_parts(void **state) {
    /* An empty file as undici sends it: headers, blank line, nothing, "\r\n" before the next delimiter. */
    parsed p;
    TU_OK(parse_str(&p,
                    "--" UNDICI_BOUNDARY "\r\n"
                    "Content-Disposition: form-data; name=\"file\"; filename=\"empty.wav\"\r\n"
                    "Content-Type: audio/wav\r\n"
                    "\r\n"
                    "\r\n"
                    "--" UNDICI_BOUNDARY "\r\n"
                    "Content-Disposition: form-data; name=\"prompt\"\r\n"
                    "\r\n"
                    "\r\n"
                    "--" UNDICI_BOUNDARY "--\r\n",
                    UNDICI_BOUNDARY));
    assert_int_equal(p.n, 2);
    assert_int_equal(p.parts[0].len, 0);
    assert_non_null(p.parts[0].data);
    expect_str(p.parts[0].filename, p.parts[0].filename_len, "empty.wav");
    expect_text(&p, 1, "prompt", "");
    parsed_free(&p);

    /* The next delimiter right after the blank line, with no line break of its own. */
    TU_OK(parse_str(&p,
                    "--b\nContent-Disposition: form-data; name=f\n\n--b\nContent-Disposition: form-data; "
                    "name=g\r\n\r\n--b--",
                    "b"));
    assert_int_equal(p.n, 2);
    expect_text(&p, 0, "f", "");
    expect_text(&p, 1, "g", "");
    parsed_free(&p);

    /* Only the closing delimiter: a form with no fields (the handler reports the missing file). */
    TU_OK(parse_str(&p, "--b--\r\n", "b"));
    assert_int_equal(p.n, 0);
    parsed_free(&p);
}

/* ---- malformed bodies ------------------------------------------------------------------------------------------ */

static void expect_bad(const char *body, const char *needle) {
    parsed p;
    TU_FAILS_WITH(parse_str(&p, body, "b"), needle);
    parsed_free(&p);
}

static void test_missing_closing_boundary(void **state) {
    expect_bad("--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc",
               "part 1 (\"file\"): the body ends before the closing boundary \"--b--\"");
    expect_bad("--b\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--b\r\n"
               "Content-Disposition: form-data; name=c\r\n\r\n2\r\n--b",
               "part 2 (\"c\"): the body ends before the closing boundary");
    expect_bad("--b\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--b-", "closing boundary");
    expect_bad("--b\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--bb--", "closing boundary");
    expect_bad("--b\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--b\r", "closing boundary");
    expect_bad("--b\r\nContent-Disposition: form-data; name=a\r\n", "the body ends inside the part's headers");
    expect_bad("--b\r\n", "the body ends inside the part's headers");
    expect_bad("--b\r\nContent-Disposition: form-data; name=a", "the body ends inside the part's headers");

    /* Every cut-short prefix of a real upload fails cleanly, up to the closing "--b--" itself. */
    unsigned char audio[1024];
    size_t audio_len = hostile_audio(audio);
    buf b;
    undici_body(&b, audio, audio_len);
    size_t complete = b.n - 2; /* "--boundary--" then "\r\n" (epilogue) */
    for (size_t len = 0; len <= b.n; len++) {
        parsed p;
        tern_err *e = parse(&p, b.d, len, UNDICI_BOUNDARY);
        if ((e != NULL) != (len < complete)) {
            print_error("prefix of %zu bytes of %zu: %s\n", len, b.n, e ? tern_err_msg(e) : "parsed");
            fail();
        }
        if (!e)
            assert_int_equal(p.n, 3);
        tern_err_free(e);
        parsed_free(&p);
    }
}

static void test_part_without_name(void **state) {
    expect_bad("--b\r\nContent-Disposition: form-data; filename=\"a.wav\"\r\n\r\nx\r\n--b--",
               "part 1: Content-Disposition \"form-data; filename=\"a.wav\"\" has no name parameter");
    expect_bad("--b\r\nContent-Disposition: form-data\r\n\r\nx\r\n--b--", "has no name parameter");
    expect_bad("--b\r\nContent-Disposition: form-data; name\r\n\r\nx\r\n--b--", "has no name parameter");
    expect_bad("--b\r\nContent-Disposition: form-data; name*=UTF-8''x\r\n\r\nx\r\n--b--", "has no name parameter");
    expect_bad("--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--", "part 1 has no Content-Disposition header");
    expect_bad("--b\r\n\r\nx\r\n--b--", "part 1 has no Content-Disposition header");
    expect_bad("--b\r\nContent-Disposition: attachment; name=a\r\n\r\nx\r\n--b--",
               "Content-Disposition is \"attachment; name=a\", expected form-data");
    expect_bad("--b\r\nContent-Disposition: form-data; name=\"a\r\n\r\nx\r\n--b--", "without its closing quote");
    expect_bad("--b\r\nContent-Disposition: form-data; name=a\r\nContent-Disposition: form-data; name=c\r\n\r\n"
               "x\r\n--b--",
               "part 1 has two Content-Disposition headers");
}

static void test_too_many_parts(void **state) {
    const char *body = "--b\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n"
                       "--b\r\nContent-Disposition: form-data; name=b\r\n\r\n2\r\n"
                       "--b\r\nContent-Disposition: form-data; name=c\r\n\r\n3\r\n"
                       "--b--\r\n";
    parsed p;
    TU_FAILS_WITH(parse_max(&p, body, strlen(body), "b", 2), "multipart body has more than 2 parts");
    parsed_free(&p);
    TU_FAILS_WITH(parse_max(&p, body, strlen(body), "b", 0), "more than 0 parts");
    parsed_free(&p);
    TU_OK(parse_max(&p, body, strlen(body), "b", 3));
    assert_int_equal(p.n, 3);
    expect_text(&p, 2, "c", "3");
    parsed_free(&p);
}

static void test_malformed_headers_and_boundaries(void **state) {
    /* Headers with no blank line after them: the first data line is read as a header. */
    expect_bad("--b\r\nContent-Disposition: form-data; name=a\r\nhello\r\n--b--",
               "part 1: header line \"hello\" has no ':' (is the blank line between the part's headers and its data "
               "missing?)");
    expect_bad("--b\r\nContent-Disposition: form-data; name=a\r\n--b--\r\n", "header line \"--b--\" has no ':'");
    /* A header line control characters and bytes beyond ASCII are not echoed as such. */
    expect_bad("--b\r\nBad\x01\xff line\r\n\r\n--b--", "header line \"Bad?? line\" has no ':'");

    /* Header lines up to 8 KiB are fine (an ignored header here); longer ones are refused. */
    size_t big = SRV_MULTIPART_MAX_HEADER_LINE;
    char *body = malloc(big + 256);
    assert_non_null(body);
    for (int extra = 0; extra <= 1; extra++) {
        size_t n = 0;
        n += (size_t)sprintf(body + n, "--b\r\nX-Long: ");
        size_t fill = big + (size_t)extra - strlen("X-Long: ");
        memset(body + n, 'v', fill);
        n += fill;
        n += (size_t)sprintf(body + n, "\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--b--");
        parsed p;
        tern_err *e = parse(&p, body, n, "b");
        if (extra) {
            TU_FAILS_WITH(e, "part 1: a header line is longer than 8192 bytes");
        } else {
            TU_OK(e);
            expect_text(&p, 0, "a", "1");
        }
        parsed_free(&p);
    }
    /* A body that never breaks its header line is refused after 8 KiB, without reading the rest. */
    memcpy(body, "--b\r\n", 5);
    memset(body + 5, 'h', big + 200);
    parsed p;
    TU_FAILS_WITH(parse(&p, body, big + 205, "b"), "longer than 8192 bytes");
    parsed_free(&p);
    free(body);

    /* No delimiter at all, the wrong boundary, a boundary only mid-line or as a prefix of a longer one. */
    expect_bad("", "multipart body has no boundary line \"--b\"");
    expect_bad("{\"model\": \"whisper-1\"}", "no boundary line");
    expect_bad("x--b\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n", "no boundary line");
    expect_bad("--bc\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--bc--", "no boundary line");
    expect_bad("--b junk\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--b -\r\n", "no boundary line");
    /* Before the first real delimiter everything is preamble, even what looks like a part: here the closing
     * delimiter is the first one, so the form is empty (and the handler says which field is missing). */
    parsed e;
    TU_OK(parse_str(&e, "--b junk\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--b--", "b"));
    assert_int_equal(e.n, 0);
    parsed_free(&e);
    parsed q;
    TU_FAILS_WITH(srv_multipart_parse(NULL, 0, "b", q.parts, 8, &q.n), "no boundary line");
    TU_FAILS_WITH(srv_multipart_parse("--\r\n", 4, "", q.parts, 8, &q.n), "1 to 70");
    TU_FAILS_WITH(srv_multipart_parse("--\r\n", 4, NULL, q.parts, 8, &q.n), "no boundary given");
    TU_FAILS_WITH(srv_multipart_parse("--a\nb\r\n", 7, "a\nb", q.parts, 8, &q.n), "control");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_undici_body),
        cmocka_unit_test(test_httpx_body),
        cmocka_unit_test(test_headers_and_params),
        cmocka_unit_test(test_boundary_extraction),
        cmocka_unit_test(test_preamble_epilogue_padding),
        cmocka_unit_test(test_lf_only),
        cmocka_unit_test(test_empty_parts),
        cmocka_unit_test(test_missing_closing_boundary),
        cmocka_unit_test(test_part_without_name),
        cmocka_unit_test(test_too_many_parts),
        cmocka_unit_test(test_malformed_headers_and_boundaries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
