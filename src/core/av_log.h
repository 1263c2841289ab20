/* av_log.h — libav's log routed into ours. libav prints warnings about corrupt input straight to stderr; a server
 * wants them in its log, at debug level (a bad upload is the client's problem, reported in the error returned). */
#ifndef TERN_CORE_AV_LOG_H
#define TERN_CORE_AV_LOG_H

/* Installs the route once per process; every caller of libav's decoders calls it first (thread-safe, cheap). */
void tern_av_log_route(void);

#endif
