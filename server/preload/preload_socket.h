/* The preload hand-off socket (docs/DESIGN.md §6): a unix stream socket where a colocated
 * process asks for a resident preload and receives the allocation's fd by
 * SCM_RIGHTS together with the layout.
 *
 * Protocol: the server checks the peer's credentials (SO_PEERCRED: its own uid,
 * root, and the configured uids may connect). The client sends one line of JSON
 * {"token":"...","preload":"<id>"}; the token needs read scope on the model's
 * namespace. The server answers one line of JSON: the layout (tg_preload_lease)
 * with the fd attached to its first byte, or {"error":REASON,"detail":SENTENCE}
 * and closes (REASON: invalid_request, preload_not_found, unauthorized, forbidden,
 * not_resident, internal, or a revoked preload's reason: model_deleted,
 * version_deleted, token_revoked, ...; the preload is re-checked before each
 * hand-out, see preload.h). The open connection is the lease: when the client closes it or
 * dies, the lease ends, and a deferred DELETE or eviction then happens. */
#ifndef TG_PRELOAD_SOCKET_H
#define TG_PRELOAD_SOCKET_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "preload.h"

#define TG_PRELOAD_SOCKET_REQUEST_MAX 8192 /* bytes of the request line */
#define TG_PRELOAD_SOCKET_UIDS_MAX 32

typedef struct tg_preload_socket tg_preload_socket;

/* True when token may read model ("org/name"); otherwise why gets a reason code
 * ("unauthorized", "forbidden") and the sentence goes to detail. */
typedef bool (*tg_preload_authorize_fn)(void *context, const char *token, const char *model,
                                        char *why, size_t why_len, char *detail, size_t detail_len);

typedef struct tg_preload_socket_config {
    const char *path;
    uid_t allowed_uids[TG_PRELOAD_SOCKET_UIDS_MAX]; /* besides the server's own uid and root */
    size_t allowed_count;
    tg_preload_manager *manager;
    tg_preload_authorize_fn authorize;
    void *authorize_context;
    unsigned max_connections; /* open connections (leases) at once, each a descriptor; 0: 1,024 */
} tg_preload_socket_config;

/* Binds path (a stale socket file there is replaced; any other file is an error)
 * and starts accepting. err gets one sentence on failure. */
int tg_preload_socket_start(const tg_preload_socket_config *config, tg_preload_socket **out,
                            char *err, size_t err_len);
/* Stops accepting, ends every connection (releasing its lease) and removes the file. */
void tg_preload_socket_stop(tg_preload_socket *socket_server);

#endif
