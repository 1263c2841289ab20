/* webui.c — GET /: the chat page (assets/webui/index.html, compiled in by cmake/embed_file.cmake). The page is the
 * same for everyone and carries no data, so it answers without an API key; everything it then asks for goes through
 * the API and its key. A Content-Security-Policy keeps the page to its own inline code and its own server, a second
 * guard (after the page's text-only rendering) against anything a model writes. */
#include "server/server_internal.h"

extern const unsigned char srv_webui_page[];
extern const unsigned long srv_webui_page_len;

static const char CSP[] = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                          "connect-src 'self'; img-src 'self' data:; media-src 'self' blob: data:; "
                          "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

int srv_handle_webui(srv_req *r, json_t *body) {
    (void)body;
    if (r->srv->cfg.no_webui)
        return srv_reply_error(r, 404, "the chat page is off on this server (tern serve --no-webui); "
                                       "the API is at /v1");
    static const char *const headers[][2] = {{"Content-Security-Policy", CSP},
                                {"X-Content-Type-Options", "nosniff"},
                                {"Cache-Control", "no-cache"},
                                {"Referrer-Policy", "no-referrer"}};
    return srv_reply_static(r, "text/html; charset=utf-8", srv_webui_page, (size_t)srv_webui_page_len, headers,
                            sizeof headers / sizeof *headers);
}
