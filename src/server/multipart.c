/* multipart.c — multipart/form-data parsing (see multipart.h).
 *
 * The body is untrusted and arrives whole, so the parser is a few bounded scans over it: find a delimiter line,
 * read the part's header lines up to the blank one, search for the next delimiter; every scan is limited by the
 * body length and nothing is written. Beyond the letter of RFC 2046 it accepts what real clients and hand-made
 * bodies (curl scripts, tests) send: bare LF line endings, a preamble, spaces after a boundary, unquoted parameter
 * values, an epilogue after the closing boundary. A delimiter is "--boundary" at the start of a line followed by
 * "--" or by a line end, so look-alikes inside binary data ("\r\n--boundaryX", "\r\n--bound") stay data. */
#include "server/multipart.h"

#include <string.h>
#include <strings.h>

static int is_ws(unsigned char c) { return c == ' ' || c == '\t'; }

/* Case-insensitive: s[0, n) is exactly `word`. */
static int word_eq(const char *s, size_t n, const char *word) {
    return strlen(word) == n && strncasecmp(s, word, n) == 0;
}

/* A printable excerpt of untrusted bytes for an error message: at most 60 characters, anything but printable ASCII
 * shown as '?', so a message never carries control characters or broken UTF-8 back to the client. */
static const char *excerpt(const void *s, size_t n, char out[64]) {
    const unsigned char *p = s;
    size_t k = n <= 60 ? n : 57;
    for (size_t i = 0; i < k; i++)
        out[i] = p[i] >= 0x20 && p[i] < 0x7f ? (char)p[i] : '?';
    if (k < n) {
        memcpy(out + k, "...", 3);
        k += 3;
    }
    out[k] = '\0';
    return out;
}

/* ---- parameters: `; name=value` lists of Content-Type and Content-Disposition ---------------------------------- */

typedef struct param {
    const char *name, *value; /* value NULL for a bare name without '=' */
    size_t name_len, value_len;
} param;

/* Reads the next parameter after *p (< end). Text that does not parse is skipped up to the next ';', so one odd
 * parameter does not hide the ones after it. Quoted values end at the next '"' with no backslash escapes: browsers
 * and undici percent-encode a '"' in a filename instead, and a filename ending in '\' must not swallow the quote.
 * Returns 0 at the end, -1 on a quoted value without its closing quote, 1 with *out filled. */
static int next_param(const char **p, const char *end, param *out) {
    const char *s = *p;
    while (s < end && *s != ';')
        s++;
    if (s == end) {
        *p = s;
        return 0;
    }
    s++;
    while (s < end && is_ws((unsigned char)*s))
        s++;
    const char *n0 = s;
    while (s < end && *s != '=' && *s != ';' && !is_ws((unsigned char)*s))
        s++;
    *out = (param){.name = n0, .name_len = (size_t)(s - n0)};
    while (s < end && is_ws((unsigned char)*s))
        s++;
    if (s < end && *s == '=') {
        s++;
        while (s < end && is_ws((unsigned char)*s))
            s++;
        if (s < end && *s == '"') {
            const char *q = memchr(s + 1, '"', (size_t)(end - s - 1));
            if (!q)
                return -1;
            out->value = s + 1;
            out->value_len = (size_t)(q - s - 1);
            s = q + 1;
        } else {
            const char *v0 = s;
            while (s < end && *s != ';' && !is_ws((unsigned char)*s))
                s++;
            out->value = v0;
            out->value_len = (size_t)(s - v0);
        }
    }
    *p = s;
    return 1;
}

/* RFC 2046 §5.1.1: 1..70 characters, not ending in a space. Its bchars set is narrower than printable ASCII, but
 * clients stray outside it and the parser treats the boundary as plain bytes, so only what would break the line
 * structure or the quoting (controls, non-ASCII, '"') is refused. */
static TERN_MUST_CHECK tern_err *check_boundary(const char *b, size_t n) {
    if (n < 1 || n > SRV_MULTIPART_BOUNDARY_CAP - 1)
        return tern_errf(TERN_EINVAL, "multipart boundary is %zu characters long; RFC 2046 allows 1 to %d", n,
                         SRV_MULTIPART_BOUNDARY_CAP - 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)b[i];
        if (c < 0x20 || c >= 0x7f || c == '"')
            return tern_errf(TERN_EINVAL, "multipart boundary has a control, non-ASCII or '\"' character at %zu", i);
    }
    if (b[n - 1] == ' ')
        return tern_errf(TERN_EINVAL, "multipart boundary ends with a space, which RFC 2046 forbids");
    return NULL;
}

tern_err *srv_multipart_boundary(const char *content_type, char *boundary, size_t cap) {
    if (cap)
        boundary[0] = '\0';
    if (!content_type)
        return tern_errf(TERN_EINVAL,
                         "Content-Type must be multipart/form-data with a boundary; the request has no Content-Type");
    const char *p = content_type, *end = content_type + strlen(content_type);
    char ex[64];
    while (is_ws((unsigned char)*p))
        p++;
    size_t tl = strcspn(p, "; \t");
    if (!word_eq(p, tl, "multipart/form-data"))
        return tern_errf(TERN_EINVAL, "Content-Type must be multipart/form-data with a boundary, got \"%s\"",
                         excerpt(content_type, (size_t)(end - content_type), ex));
    p += tl;
    const char *b = NULL;
    size_t blen = 0;
    param pm;
    int r;
    while ((r = next_param(&p, end, &pm)) != 0) {
        if (r < 0)
            return tern_errf(TERN_EINVAL,
                             "Content-Type must be multipart/form-data with a boundary; a quoted parameter of \"%s\" "
                             "has no closing quote",
                             excerpt(content_type, (size_t)(end - content_type), ex));
        if (!b && pm.value && word_eq(pm.name, pm.name_len, "boundary")) {
            b = pm.value;
            blen = pm.value_len;
        }
    }
    if (!b)
        return tern_errf(TERN_EINVAL,
                         "Content-Type must be multipart/form-data with a boundary; \"%s\" has no boundary parameter",
                         excerpt(content_type, (size_t)(end - content_type), ex));
    TERN_TRY(tern_err_wrap(check_boundary(b, blen), "Content-Type"));
    if (blen >= cap)
        return tern_errf(TERN_EINVAL, "multipart boundary of %zu characters does not fit a %zu-byte buffer", blen, cap);
    memcpy(boundary, b, blen);
    boundary[blen] = '\0';
    return NULL;
}

/* ---- the body ---------------------------------------------------------------------------------------------------- */

typedef struct scan {
    const unsigned char *b;
    size_t len;
    unsigned char delim[3 + SRV_MULTIPART_BOUNDARY_CAP]; /* "\n--" boundary: a delimiter always starts a line */
    size_t delim_len;
} scan;

enum { NOT_DELIM = 0, PART_DELIM, CLOSE_DELIM };

/* What "--boundary" at b[at] is: a look-alike in data, the delimiter of another part (*next is then past its line
 * end; spaces before it are RFC 2046 transport padding), or the closing one (anything after it is epilogue). */
static int delimiter_at(const scan *s, size_t at, size_t *next) {
    size_t dl = s->delim_len - 1;
    if (s->len - at < dl || memcmp(s->b + at, s->delim + 1, dl) != 0)
        return NOT_DELIM;
    size_t p = at + dl;
    if (s->len - p >= 2 && s->b[p] == '-' && s->b[p + 1] == '-')
        return CLOSE_DELIM;
    while (p < s->len && is_ws(s->b[p]))
        p++;
    if (p < s->len && s->b[p] == '\r')
        p++;
    if (p < s->len && s->b[p] == '\n') {
        *next = p + 1;
        return PART_DELIM;
    }
    return NOT_DELIM;
}

/* The first delimiter whose line starts after b[from] (which is where its '\n' may be); *lf is that '\n'. */
static int find_delimiter(const scan *s, size_t from, size_t *lf, size_t *next) {
    while (from < s->len) {
        const unsigned char *hit = memmem(s->b + from, s->len - from, s->delim, s->delim_len);
        if (!hit)
            return NOT_DELIM;
        size_t at = (size_t)(hit - s->b);
        int kind = delimiter_at(s, at + 1, next);
        if (kind != NOT_DELIM) {
            *lf = at;
            return kind;
        }
        from = at + 1;
    }
    return NOT_DELIM;
}

/* Content-Disposition: form-data; name="..."; filename="...". filename* (RFC 5987 encoding) is ignored: RFC 7578
 * §4.2 says not to send it, and the filename only hints at the format, which is sniffed from the bytes anyway. */
static TERN_MUST_CHECK tern_err *parse_disposition(const char *v, size_t n, size_t index, srv_part *pt) {
    char ex[64];
    size_t tl = 0;
    while (tl < n && v[tl] != ';' && !is_ws((unsigned char)v[tl]))
        tl++;
    if (!word_eq(v, tl, "form-data"))
        return tern_errf(TERN_EINVAL,
                         "multipart part %zu: Content-Disposition is \"%s\", expected form-data; name=\"...\"", index,
                         excerpt(v, n, ex));
    const char *p = v + tl, *end = v + n;
    param pm;
    int r;
    while ((r = next_param(&p, end, &pm)) != 0) {
        if (r < 0)
            return tern_errf(TERN_EINVAL,
                             "multipart part %zu: Content-Disposition \"%s\" has a quoted value without "
                             "its closing quote",
                             index, excerpt(v, n, ex));
        if (!pm.value)
            continue;
        if (!pt->name && word_eq(pm.name, pm.name_len, "name")) {
            pt->name = pm.value;
            pt->name_len = pm.value_len;
        } else if (!pt->filename && word_eq(pm.name, pm.name_len, "filename")) {
            pt->filename = pm.value;
            pt->filename_len = pm.value_len;
        }
    }
    if (!pt->name)
        return tern_errf(TERN_EINVAL,
                         "multipart part %zu: Content-Disposition \"%s\" has no name parameter (every form field "
                         "needs name=\"...\")",
                         index, excerpt(v, n, ex));
    return NULL;
}

/* Reads part `index`'s header lines from *pos through the blank line; *pos is then where its data starts. */
static TERN_MUST_CHECK tern_err *parse_headers(const scan *s, size_t *pos, size_t index, srv_part *pt) {
    char ex[64];
    size_t p = *pos;
    const char *disp = NULL;
    size_t disp_len = 0;
    for (;;) {
        size_t avail = s->len - p;
        /* Look no further than the longest line allowed (plus its CRLF), so a body with no line break costs no
         * more than that to refuse. */
        size_t lim = avail < SRV_MULTIPART_MAX_HEADER_LINE + 2 ? avail : SRV_MULTIPART_MAX_HEADER_LINE + 2;
        const unsigned char *nl = lim ? memchr(s->b + p, '\n', lim) : NULL;
        if (!nl && lim < avail)
            return tern_errf(TERN_EINVAL, "multipart part %zu: a header line is longer than %d bytes", index,
                             SRV_MULTIPART_MAX_HEADER_LINE);
        if (!nl)
            return tern_errf(TERN_EINVAL,
                             "multipart part %zu: the body ends inside the part's headers (cut short, or "
                             "no blank line between the headers and the data)",
                             index);
        size_t e = (size_t)(nl - s->b), next = e + 1;
        if (e > p && s->b[e - 1] == '\r')
            e--;
        if (e - p > SRV_MULTIPART_MAX_HEADER_LINE)
            return tern_errf(TERN_EINVAL, "multipart part %zu: a header line is longer than %d bytes", index,
                             SRV_MULTIPART_MAX_HEADER_LINE);
        const char *line = (const char *)s->b + p;
        size_t ll = e - p;
        p = next;
        if (ll == 0)
            break;
        /* A folded continuation line (obsolete header folding): no client folds the headers this parser reads, so
         * it is dropped rather than joined, which in-place parsing could not do anyway. */
        if (is_ws((unsigned char)line[0]))
            continue;
        const char *colon = memchr(line, ':', ll);
        if (!colon)
            return tern_errf(TERN_EINVAL,
                             "multipart part %zu: header line \"%s\" has no ':' (is the blank line between the "
                             "part's headers and its data missing?)",
                             index, excerpt(line, ll, ex));
        size_t hn = (size_t)(colon - line);
        while (hn && is_ws((unsigned char)line[hn - 1]))
            hn--;
        const char *v = colon + 1, *vend = line + ll;
        while (v < vend && is_ws((unsigned char)*v))
            v++;
        while (vend > v && is_ws((unsigned char)vend[-1]))
            vend--;
        if (word_eq(line, hn, "content-disposition")) {
            /* Two would name the part two ways, and which one a proxy or firewall in front of the server went by
             * cannot be known: refuse rather than guess. */
            if (disp)
                return tern_errf(TERN_EINVAL, "multipart part %zu has two Content-Disposition headers", index);
            disp = v;
            disp_len = (size_t)(vend - v);
        } else if (word_eq(line, hn, "content-type") && !pt->content_type) {
            pt->content_type = v;
            pt->content_type_len = (size_t)(vend - v);
        }
    }
    *pos = p;
    if (!disp)
        return tern_errf(TERN_EINVAL,
                         "multipart part %zu has no Content-Disposition header (every form field needs "
                         "\"Content-Disposition: form-data; name=...\")",
                         index);
    return parse_disposition(disp, disp_len, index, pt);
}

tern_err *srv_multipart_parse(const void *body, size_t len, const char *boundary, srv_part *parts, size_t max_parts,
                              size_t *n_parts) {
    *n_parts = 0;
    if (!boundary)
        return tern_errf(TERN_EINVAL, "multipart body: no boundary given");
    size_t blen = strlen(boundary);
    TERN_TRY(check_boundary(boundary, blen));
    scan s = {.b = body, .len = body ? len : 0, .delim_len = 3 + blen};
    memcpy(s.delim, "\n--", 3);
    memcpy(s.delim + 3, boundary, blen);

    /* The first delimiter either opens the body or ends a preamble line. */
    size_t pos = 0, lf = 0;
    int kind = delimiter_at(&s, 0, &pos);
    if (kind == NOT_DELIM)
        kind = find_delimiter(&s, 0, &lf, &pos);
    if (kind == NOT_DELIM)
        return tern_errf(TERN_EINVAL,
                         "multipart body has no boundary line \"--%s\" (the body is not multipart, or its boundary "
                         "differs from the Content-Type's)",
                         boundary);
    size_t n = 0;
    while (kind == PART_DELIM) {
        if (n == max_parts)
            return tern_errf(TERN_EINVAL, "multipart body has more than %zu parts", max_parts);
        srv_part *pt = &parts[n];
        memset(pt, 0, sizeof *pt);
        TERN_TRY(parse_headers(&s, &pos, n + 1, pt));
        /* From the blank line's own '\n', so a sender that puts the next delimiter right after it (no CRLF of
         * its own) gives an empty part rather than an error. */
        size_t next = 0;
        kind = find_delimiter(&s, pos - 1, &lf, &next);
        if (kind == NOT_DELIM) {
            char ex[64];
            return tern_errf(TERN_EINVAL,
                             "multipart part %zu (\"%s\"): the body ends before the closing boundary \"--%s--\" "
                             "(the upload was cut short?)",
                             n + 1, excerpt(pt->name, pt->name_len, ex), boundary);
        }
        /* The line break before a delimiter belongs to the delimiter, not to the data. */
        size_t end = lf;
        if (end > pos && s.b[end - 1] == '\r')
            end--;
        if (end < pos)
            end = pos;
        pt->data = s.b + pos;
        pt->len = end - pos;
        n++;
        pos = next;
    }
    *n_parts = n;
    return NULL;
}

const srv_part *srv_multipart_find(const srv_part *parts, size_t n, const char *name) {
    size_t k = strlen(name);
    for (size_t i = 0; i < n; i++)
        if (parts[i].name_len == k && memcmp(parts[i].name, name, k) == 0)
            return &parts[i];
    return NULL;
}
