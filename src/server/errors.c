/* errors.c — error replies in the shape each API's clients parse: OpenAI {"error":{message,type,param,code}},
 * Anthropic {"type":"error","error":{type,message}}. The status decides the type. */
#include <string.h>

#include "server/server_internal.h"

int srv_status_for_code(tern_code code) {
    switch (code) {
    case TERN_EINVAL:
    case TERN_EFORMAT:
    case TERN_EUNSUPPORTED:
    case TERN_ENOTFOUND: return 400;
    case TERN_EOVERLOAD: return 429;
    case TERN_ENOMEM:
    case TERN_ECANCELLED: return 503;
    default: return 500;
    }
}

const char *srv_error_type(srv_api api, int status) {
    switch (status) {
    case 400:
    case 405:
    case 415: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return api == API_ANTHROPIC ? "request_too_large" : "invalid_request_error";
    case 429: return "rate_limit_error";
    case 503: return api == API_ANTHROPIC ? "overloaded_error" : "server_unavailable";
    case 504: return "timeout_error";
    default: return api == API_ANTHROPIC ? "api_error" : "server_error";
    }
}

json_t *srv_error_json(srv_api api, int status, const char *message) {
    json_t *msg = srv_json_string_lossy(message, strlen(message));
    if (api == API_ANTHROPIC)
        return json_pack("{s:s,s:{s:s,s:o}}", "type", "error", "error", "type", srv_error_type(api, status),
                         "message", msg);
    return json_pack("{s:{s:o,s:s,s:n,s:n}}", "error", "message", msg, "type", srv_error_type(api, status), "param",
                     "code");
}
