/* The publish-time check of a version's safetensors shards, the one used by every
 * publish (POST .../publish and the Hub's commit through server/routes/versions.c,
 * mirrors through server/jobs/mirror_job.c): with an index
 * (*.safetensors.index.json), the index against the .safetensors files of its
 * directory; without, that the files of each shard set (PREFIX-NNNNN-of-MMMMM)
 * there hold disjoint tensors. */
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
