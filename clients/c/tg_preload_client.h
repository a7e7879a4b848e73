/* The client of the preload hand-off socket, for processes on the same host as
 * tensorgate (see server/preload/preload_socket.h for the protocol).
 *
 *   tg_preload_client *c;
 *   if (tg_preload_open("/data/preload.sock", token, id, &c, err, sizeof err) == 0) {
 *       const tg_preload_tensor *t = tg_preload_find(c, "model.layers.0.mlp.up_proj.weight");
 *       const void *bytes = tg_preload_data(c, t);   // host preloads: read-only mapping
 *       ...
 *       tg_preload_close(c);                         // ends the lease
 *   }
 *
 * The open connection is the lease: the server keeps the memory until
 * tg_preload_close (or this process's death). Use the memory only while the lease
 * is held: a host preload's fd is read-only, and once the preload is deleted or
 * evicted after the lease the server truncates the memfd to 0 bytes, so a kept fd
 * names nothing and a kept mapping raises SIGBUS (docs/preload-handoff.md).
 * For a CUDA preload the fd is a CUDA VMM POSIX-fd handle: import it with
 * cuMemImportFromShareableHandle and map it; tg_preload_data returns NULL there.
 * Links with jansson. */
#ifndef TG_PRELOAD_CLIENT_H
#define TG_PRELOAD_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_PRELOAD_CLIENT_RANK_MAX 16
#define TG_PRELOAD_CLIENT_REPLY_MAX (64u << 20) /* bytes of the layout line */

typedef struct tg_preload_tensor {
    const char *name;
    const char *dtype; /* "BF16", "F32", ... as placed */
    size_t rank;
    uint64_t shape[TG_PRELOAD_CLIENT_RANK_MAX];
    uint64_t offset; /* in the allocation; a multiple of 256 */
    uint64_t bytes;
} tg_preload_tensor;

typedef struct tg_preload_client tg_preload_client;

/* Connects, authenticates, receives the fd and the layout, and (when the server
 * says the allocation is mappable: host memfd) maps it read-only. On failure
 * returns -1 with one sentence in err (the server's reason first, e.g.
 * "not_resident: preload ... is loading, not resident"). */
int tg_preload_open(const char *socket_path, const char *token, const char *preload_id,
                    tg_preload_client **out, char *err, size_t err_len);

/* Ends the lease: unmaps, closes the fd and the connection. NULL is fine. */
void tg_preload_close(tg_preload_client *client);

size_t tg_preload_tensor_count(const tg_preload_client *client);
const tg_preload_tensor *tg_preload_tensor_at(const tg_preload_client *client, size_t index);
/* By exact name; NULL if the preload has no such tensor. */
const tg_preload_tensor *tg_preload_find(const tg_preload_client *client, const char *name);
/* The tensor's bytes in the read-only mapping; NULL when the allocation is not mappable. */
const void *tg_preload_data(const tg_preload_client *client, const tg_preload_tensor *tensor);

int tg_preload_fd(const tg_preload_client *client);                  /* owned by the client */
const char *tg_preload_device(const tg_preload_client *client);      /* "host", "cuda:0" */
uint64_t tg_preload_bytes(const tg_preload_client *client);          /* size of the allocation */
const char *tg_preload_layout_json(const tg_preload_client *client); /* the server's reply line */

#endif
