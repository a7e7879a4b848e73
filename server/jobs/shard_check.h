/* The publish-time check of a version's safetensors shards, for work that publishes
 * without a request (server/jobs/mirror_job.c): with an index
 * (*.safetensors.index.json), the index against the .safetensors files of its
 * directory; without, that the files of each shard set (PREFIX-NNNNN-of-MMMMM)
 * there hold disjoint tensors. The same rules as POST .../publish
 * (server/routes/versions.c's check_shards, of which this is a copy on a blob store
 * rather than a server; the two can become one at the merge). */
#ifndef TG_SHARD_CHECK_H
#define TG_SHARD_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "blobstore.h"
#include "catalog.h"

/* Returns 0 ok, 1 mismatch (detail set), -1 a header or index could not be read. */
int tg_shard_check(tg_blobstore *blobs, uint64_t max_header, const tg_file_records *files,
                   char *detail, size_t detail_len);

#endif
