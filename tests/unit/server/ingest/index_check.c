/* Unit tests for server/ingest/index_check.c: index/shard agreement at publish. */
#include "index_check.h"
#include "test.h"

static const char *const shard1_names[] = {"model.embed.weight", "layers.0.w"};
static const char *const shard2_names[] = {"layers.1.w", "lm_head.weight"};
static const char *const collide_names[] = {"layers.0.w"};

static const tg_shard two_shards[] = {
    {"model-00001-of-00002.safetensors", 2, shard1_names, 100},
    {"model-00002-of-00002.safetensors", 2, shard2_names, 60},
};

static const char good_index[] = "{\"metadata\":{\"total_size\":160},\"weight_map\":{"
                                 "\"model.embed.weight\":\"model-00001-of-00002.safetensors\","
                                 "\"layers.0.w\":\"model-00001-of-00002.safetensors\","
                                 "\"layers.1.w\":\"model-00002-of-00002.safetensors\","
                                 "\"lm_head.weight\":\"model-00002-of-00002.safetensors\"}}";

static bool check(const char *json, const tg_shard *shards, size_t count, char *detail)
{
    return tg_index_check("model.safetensors.index.json", json, strlen(json), shards, count, detail,
                          256);
}

TEST(agreeing_index_passes)
{
    char detail[256] = "";
    CHECK(check(good_index, two_shards, 2, detail));
    /* total_size is optional. */
    CHECK(check("{\"weight_map\":{\"model.embed.weight\":\"model-00001-of-00002.safetensors\","
                "\"layers.0.w\":\"model-00001-of-00002.safetensors\","
                "\"layers.1.w\":\"model-00002-of-00002.safetensors\","
                "\"lm_head.weight\":\"model-00002-of-00002.safetensors\"}}",
                two_shards, 2, detail));
}

TEST(wrong_shard_named)
{
    char detail[256] = "";
    CHECK(!check("{\"weight_map\":{\"model.embed.weight\":\"model-00002-of-00002.safetensors\","
                 "\"layers.0.w\":\"model-00001-of-00002.safetensors\","
                 "\"layers.1.w\":\"model-00002-of-00002.safetensors\","
                 "\"lm_head.weight\":\"model-00002-of-00002.safetensors\"}}",
                 two_shards, 2, detail));
    CHECK(strstr(detail, "model.embed.weight") != NULL);
    CHECK(strstr(detail, "model-00001-of-00002.safetensors") != NULL);
}

TEST(missing_shard_file)
{
    char detail[256] = "";
    CHECK(!check("{\"weight_map\":{\"model.embed.weight\":\"model-00003-of-00003.safetensors\"}}",
                 two_shards, 2, detail));
    CHECK(strstr(detail, "model-00003-of-00003.safetensors") != NULL);
}

TEST(unmapped_tensor)
{
    char detail[256] = "";
    CHECK(!check("{\"weight_map\":{\"model.embed.weight\":\"model-00001-of-00002.safetensors\","
                 "\"layers.0.w\":\"model-00001-of-00002.safetensors\","
                 "\"layers.1.w\":\"model-00002-of-00002.safetensors\"}}",
                 two_shards, 2, detail));
    CHECK(strstr(detail, "lm_head.weight") != NULL);
    CHECK(strstr(detail, "missing from the weight_map") != NULL);
}

TEST(mapped_tensor_absent)
{
    char detail[256] = "";
    char json[1024];
    snprintf(json, sizeof json, "%.*s,\"ghost\":\"model-00001-of-00002.safetensors\"}}",
             (int)(strlen(good_index) - 2), good_index);
    CHECK(!check(json, two_shards, 2, detail));
    CHECK(strstr(detail, "ghost") != NULL);
}

TEST(total_size_wrong)
{
    char detail[256] = "";
    char json[1024];
    snprintf(json, sizeof json, "%s", good_index);
    char *at = strstr(json, "160");
    at[2] = '1'; /* 161 */
    CHECK(!check(json, two_shards, 2, detail));
    CHECK(strstr(detail, "total_size") != NULL);
    CHECK(
        !check("{\"metadata\":{\"total_size\":\"160\"},\"weight_map\":{}}", two_shards, 2, detail));
}

TEST(tensor_in_two_shards)
{
    tg_shard shards[3] = {two_shards[0], two_shards[1], {"extra.safetensors", 1, collide_names, 4}};
    char detail[256] = "";
    /* a file the index names that holds a tensor of another shard */
    static const char names_extra[] = "{\"weight_map\":{"
                                      "\"model.embed.weight\":\"model-00001-of-00002.safetensors\","
                                      "\"layers.0.w\":\"model-00001-of-00002.safetensors\","
                                      "\"layers.1.w\":\"extra.safetensors\","
                                      "\"lm_head.weight\":\"model-00002-of-00002.safetensors\"}}";
    CHECK(!check(names_extra, shards, 3, detail));
    CHECK(strstr(detail, "layers.0.w") != NULL);
    CHECK(strstr(detail, "extra.safetensors") != NULL);
    /* a file the index does not name (consolidated.safetensors, a variant beside the
     * shards) is no shard of it: its tensors, total_size and names are not compared */
    CHECK(check(good_index, shards, 3, detail));
    tg_shard beside[3] = {
        {"consolidated.safetensors", 2, shard1_names, 100}, two_shards[0], two_shards[1]};
    CHECK(check(good_index, beside, 3, detail));
    /* in another directory than the index: never one of its shards */
    tg_shard other_dir[2] = {{"sub/model-00001-of-00002.safetensors", 2, shard1_names, 100},
                             two_shards[1]};
    CHECK(!check(good_index, other_dir, 2, detail));
    CHECK(!tg_shards_disjoint(shards, 3, detail, sizeof detail));
    CHECK(tg_shards_disjoint(two_shards, 2, detail, sizeof detail));
}

TEST(malformed_index)
{
    char detail[256] = "";
    CHECK(!check("[]", two_shards, 2, detail));
    CHECK(!check("{\"weight_map\":[]}", two_shards, 2, detail));
    CHECK(!check("{\"weight_map\":{\"a\":1}}", two_shards, 2, detail));
    CHECK(!check("{\"weight_map\":{\"a\":\"x\",\"a\":\"y\"}}", two_shards, 2, detail));
}

TEST(index_in_subdirectory)
{
    static const char *const names[] = {"t"};
    tg_shard shards[] = {{"unet/diffusion_pytorch_model.safetensors", 1, names, 8}};
    char detail[256] = "";
    const char *json = "{\"weight_map\":{\"t\":\"diffusion_pytorch_model.safetensors\"}}";
    CHECK(tg_index_check("unet/diffusion_pytorch_model.safetensors.index.json", json, strlen(json),
                         shards, 1, detail, sizeof detail));
    CHECK(!tg_index_check("model.safetensors.index.json", json, strlen(json), shards, 1, detail,
                          sizeof detail));
}

TEST(path_kinds)
{
    CHECK(tg_is_index_path("model.safetensors.index.json"));
    CHECK(tg_is_index_path("a/diffusion_pytorch_model.safetensors.index.json"));
    CHECK(!tg_is_index_path("config.json"));
    CHECK(tg_is_safetensors_path("model.safetensors"));
    CHECK(!tg_is_safetensors_path("model.safetensors.index.json"));
    CHECK(!tg_is_safetensors_path("safetensors"));
}

TEST(shard_set_keys)
{
    char key[128];
    CHECK(tg_shard_set_key("model-00001-of-00002.safetensors", key, sizeof key));
    CHECK_STR(key, "model-of-00002");
    CHECK(tg_shard_set_key("te/model.fp16-00002-of-00002.safetensors", key, sizeof key));
    CHECK_STR(key, "te/model.fp16-of-00002");
    CHECK(!tg_shard_set_key("model.safetensors", key, sizeof key));
    CHECK(!tg_shard_set_key("model.fp16.safetensors", key, sizeof key));
    CHECK(!tg_shard_set_key("-of-2.safetensors", key, sizeof key));
    CHECK(!tg_shard_set_key("00001-of-00002.safetensors", key, sizeof key));
    CHECK(!tg_shard_set_key("a-1-of-.safetensors", key, sizeof key));
    CHECK(!tg_shard_set_key("a-x-of-2.safetensors", key, sizeof key));
    CHECK(!tg_shard_set_key("model-00001-of-00002.safetensors", key, 8)); /* too small */
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(agreeing_index_passes);
    RUN(wrong_shard_named);
    RUN(missing_shard_file);
    RUN(unmapped_tensor);
    RUN(mapped_tensor_absent);
    RUN(total_size_wrong);
    RUN(tensor_in_two_shards);
    RUN(shard_set_keys);
    RUN(malformed_index);
    RUN(index_in_subdirectory);
    RUN(path_kinds);
    return test_report(argv[0]);
}
