/* routes.c — the route table: which handler answers which method and path. A known path asked with another
 * method is a 405 that lists the allowed ones; anything else is a 404. HEAD is answered like GET. */
#include <stdio.h>
#include <string.h>

#include "server/server_internal.h"

typedef struct route {
    const char *method;
    const char *path; /* exact; a prefix and one more segment when it ends with '/' (but "/" is exact); any tail when it ends with '*' */
    srv_handler handler;
    int id;
    srv_api api;
} route;

static const route ROUTES[] = {
    {"POST", "/v1/chat/completions", srv_handle_chat, SRV_ROUTE_CHAT, API_OPENAI},
    {"POST", "/v1/completions", srv_handle_completions, SRV_ROUTE_COMPLETIONS, API_OPENAI},
    {"POST", "/v1/embeddings", srv_handle_embeddings, SRV_ROUTE_EMBEDDINGS, API_OPENAI},
    {"POST", "/v1/responses", srv_handle_responses, SRV_ROUTE_RESPONSES, API_OPENAI},
    {"GET", "/v1/responses/*", srv_handle_response_get, SRV_ROUTE_RESPONSES, API_OPENAI},
    {"DELETE", "/v1/responses/*", srv_handle_response_delete, SRV_ROUTE_RESPONSES, API_OPENAI},
    {"POST", "/v1/audio/transcriptions", srv_handle_transcriptions, SRV_ROUTE_TRANSCRIPTIONS, API_OPENAI},
    {"POST", "/v1/messages", srv_handle_messages, SRV_ROUTE_MESSAGES, API_ANTHROPIC},
    {"POST", "/v1/messages/count_tokens", srv_handle_count_tokens, SRV_ROUTE_COUNT_TOKENS, API_ANTHROPIC},
    {"GET", "/v1/models", srv_handle_models, SRV_ROUTE_MODELS, API_OPENAI},
    {"GET", "/v1/models/", srv_handle_model, SRV_ROUTE_MODELS, API_OPENAI},
    {"GET", "/health", srv_handle_health, SRV_ROUTE_HEALTH, API_OPENAI},
    {"GET", "/health/live", srv_handle_live, SRV_ROUTE_HEALTH, API_OPENAI},
    {"GET", "/health/ready", srv_handle_health, SRV_ROUTE_HEALTH, API_OPENAI},
    {"GET", "/metrics", srv_handle_metrics, SRV_ROUTE_METRICS, API_OPENAI},
    {"GET", "/", srv_handle_webui, SRV_ROUTE_WEBUI, API_OPENAI},
};

static int path_matches(const route *r, const char *url) {
    size_t n = strlen(r->path);
    if (r->path[n - 1] == '*')
        return strncmp(url, r->path, n - 1) == 0 && url[n - 1] != 0;
    if (n > 1 && r->path[n - 1] == '/')
        return strncmp(url, r->path, n) == 0 && url[n] != 0 && !strchr(url + n, '/');
    return strcmp(url, r->path) == 0;
}

int srv_route(const char *method, const char *url, srv_handler *h, int *route_id, srv_api *api, const char **allow) {
    const char *m = strcmp(method, "HEAD") == 0 ? "GET" : method;
    const route *found = NULL;
    for (size_t i = 0; i < sizeof ROUTES / sizeof *ROUTES; i++) {
        if (!path_matches(&ROUTES[i], url))
            continue;
        found = &ROUTES[i];
        if (strcmp(ROUTES[i].method, m) == 0) {
            *h = ROUTES[i].handler;
            *route_id = ROUTES[i].id;
            *api = ROUTES[i].api;
            return 0;
        }
    }
    if (found) {
        static __thread char methods[64];
        methods[0] = 0;
        for (size_t i = 0; i < sizeof ROUTES / sizeof *ROUTES; i++)
            if (path_matches(&ROUTES[i], url)) {
                int get = strcmp(ROUTES[i].method, "GET") == 0;
                size_t len = strlen(methods);
                snprintf(methods + len, sizeof methods - len, "%s%s", len ? ", " : "",
                         get ? "GET, HEAD" : ROUTES[i].method);
            }
        *route_id = found->id;
        *api = found->api;
        *allow = methods;
        return 405;
    }
    *api = strncmp(url, "/v1/messages", 12) == 0 ? API_ANTHROPIC : API_OPENAI;
    return 404;
}
