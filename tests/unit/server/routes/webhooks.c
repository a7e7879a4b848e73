/* server/routes/webhooks.c, black-box: /v1/namespaces/{org}/webhooks... against the
 * real server through the integration harness, started with no --import-allow and
 * no delivery worker (--webhook-workers 0: deliveries stay pending, so the log is
 * what the routes made). Create (201, the secret once, made by the server when
 * absent), get and list (never the secret), patch, ping, the delivery log and one
 * delivery, redeliver, delete; the refusals with the status and reason openapi.yaml
 * names (loopback and metadata addresses, bad events, secrets, URLs, ids, fields),
 * and the tokens: none 401, read or write 403, another namespace's admin 403. */
#include "harness.h"

#define HOOKS "/v1/namespaces/acme/webhooks"

static const char *admin_acme, *admin_other, *write_acme, *read_acme;

static long long create(const char *body)
{
    it_response r = it_send_json("POST", HOOKS, admin_acme, body);
    CHECK_STATUS(r, 201);
    long long id = r.json ? it_json_int(r.json, "id") : -1;
    it_response_free(&r);
    return id;
}

TEST(create_get_list_update_delete)
{
    it_response r = it_send_json("POST", HOOKS, admin_acme,
                                 "{\"url\":\"http://93.184.216.34/hook\",\"events\":"
                                 "[\"version.published\",\"alias.moved\"],"
                                 "\"secret\":\"0123456789abcdef-secret\"}");
    CHECK_STATUS(r, 201);
    CHECK_STR(it_json_str(&r, "secret"), "0123456789abcdef-secret");
    CHECK_STR(it_json_str(&r, "namespace"), "acme");
    CHECK(json_is_true(json_object_get(r.json, "enabled")));
    CHECK(json_is_null(json_object_get(r.json, "disabled_reason")));
    long long id = it_json_int(r.json, "id");
    it_response_free(&r);
    char path[128];
    snprintf(path, sizeof path, HOOKS "/%lld", id);
    r = it_request("GET", path, &(it_request_opts){.token = admin_acme});
    CHECK_STATUS(r, 200);
    CHECK(json_object_get(r.json, "secret") == NULL);
    CHECK(strstr((const char *)r.body.data, "0123456789abcdef-secret") == NULL);
    json_t *events = json_object_get(r.json, "events");
    CHECK_EQ_U64(json_array_size(events), 2);
    CHECK_STR(json_string_value(json_array_get(events, 1)), "alias.moved");
    it_response_free(&r);
    /* no secret given: one is made and shown once */
    r = it_send_json("POST", HOOKS, admin_acme,
                     "{\"url\":\"https://93.184.216.34/x\",\"events\":[\"model.created\"]}");
    CHECK_STATUS(r, 201);
    const char *made = it_json_str(&r, "secret");
    CHECK(made != NULL && strncmp(made, "whsec_", 6) == 0 && strlen(made) >= 22);
    it_response_free(&r);
    r = it_request("GET", HOOKS, &(it_request_opts){.token = admin_acme});
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "webhooks")), 2);
    CHECK(strstr((const char *)r.body.data, "secret") == NULL);
    it_response_free(&r);
    /* another namespace's list is its own */
    r = it_request("GET", "/v1/namespaces/other/webhooks",
                   &(it_request_opts){.token = admin_other});
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "webhooks")), 0);
    it_response_free(&r);
    r = it_send_json("PATCH", path, admin_acme,
                     "{\"enabled\":false,\"events\":[\"job.finished\"]}");
    CHECK_STATUS(r, 200);
    CHECK(json_is_false(json_object_get(r.json, "enabled")));
    CHECK_STR(it_json_str(&r, "disabled_reason"), "disabled by an administrator");
    CHECK_STR(json_string_value(json_array_get(json_object_get(r.json, "events"), 0)),
              "job.finished");
    it_response_free(&r);
    r = it_send_json("PATCH", path, admin_acme, "{\"enabled\":true}");
    CHECK_STATUS(r, 200);
    CHECK(json_is_true(json_object_get(r.json, "enabled")));
    CHECK_EQ_U64(it_json_int(r.json, "consecutive_failures"), 0);
    it_response_free(&r);
    r = it_send_json("PATCH", path, admin_acme, "{\"enabled\":\"yes\"}");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = it_send_json("PATCH", path, admin_acme, "{\"secret\":\"0123456789abcdef-other\"}");
    CHECK_PROBLEM(r, 400, "invalid_request"); /* the secret is set at creation only */
    it_response_free(&r);
    r = it_request("DELETE", path, &(it_request_opts){.token = admin_acme});
    CHECK_STATUS(r, 204);
    it_response_free(&r);
    r = it_request("DELETE", path, &(it_request_opts){.token = admin_acme});
    CHECK_PROBLEM(r, 404, "webhook_not_found");
    it_response_free(&r);
}

TEST(ping_deliveries_redeliver)
{
    long long id = create("{\"url\":\"http://93.184.216.34/p\",\"events\":[\"model.created\"],"
                          "\"secret\":\"0123456789abcdef-secret\"}");
    char path[160];
    snprintf(path, sizeof path, HOOKS "/%lld/ping", id);
    it_response r = it_send("POST", path, admin_acme, NULL, 0);
    CHECK_STATUS(r, 202);
    char event[64];
    snprintf(event, sizeof event, "%s",
             it_json_str(&r, "event_id") ? it_json_str(&r, "event_id") : "");
    CHECK(strncmp(event, "evt_", 4) == 0);
    it_response_free(&r);
    /* a model created: one more delivery */
    r = it_send_json("POST", "/v1/models", write_acme, "{\"name\":\"acme/hooked\"}");
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    snprintf(path, sizeof path, HOOKS "/%lld/deliveries", id);
    r = it_request("GET", path, &(it_request_opts){.token = admin_acme});
    CHECK_STATUS(r, 200);
    json_t *list = json_object_get(r.json, "deliveries");
    CHECK_EQ_U64(json_array_size(list), 2);
    json_t *newest = json_array_get(list, 0), *ping = json_array_get(list, 1);
    CHECK_STR(json_string_value(json_object_get(newest, "type")), "model.created");
    CHECK_STR(json_string_value(json_object_get(ping, "type")), "ping");
    CHECK_STR(json_string_value(json_object_get(ping, "event_id")), event);
    CHECK_STR(json_string_value(json_object_get(ping, "state")), "pending");
    CHECK(json_is_string(json_object_get(ping, "next_attempt")));
    long long delivery = it_json_int(ping, "id");
    it_response_free(&r);
    snprintf(path, sizeof path, HOOKS "/%lld/deliveries?limit=1", id);
    r = it_request("GET", path, &(it_request_opts){.token = admin_acme});
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "deliveries")), 1);
    CHECK(json_is_string(json_object_get(r.json, "next_cursor")));
    it_response_free(&r);
    snprintf(path, sizeof path, HOOKS "/%lld/deliveries/%lld", id, delivery);
    r = it_request("GET", path, &(it_request_opts){.token = admin_acme});
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "event_id"), event);
    it_response_free(&r);
    snprintf(path, sizeof path, HOOKS "/%lld/deliveries/%lld/redeliver", id, delivery);
    r = it_send("POST", path, admin_acme, NULL, 0);
    CHECK_STATUS(r, 202);
    CHECK_STR(it_json_str(&r, "event_id"), event);
    CHECK_EQ_U64(it_json_int(r.json, "attempts"), 0);
    it_response_free(&r);
    snprintf(path, sizeof path, HOOKS "/%lld/deliveries/999999", id);
    r = it_request("GET", path, &(it_request_opts){.token = admin_acme});
    CHECK_PROBLEM(r, 404, "webhook_delivery_not_found");
    it_response_free(&r);
    snprintf(path, sizeof path, HOOKS "/%lld/deliveries/999999/redeliver", id);
    r = it_send("POST", path, admin_acme, NULL, 0);
    CHECK_PROBLEM(r, 404, "webhook_delivery_not_found");
    it_response_free(&r);
    r = it_send("POST", HOOKS "/999999/ping", admin_acme, NULL, 0);
    CHECK_PROBLEM(r, 404, "webhook_not_found");
    it_response_free(&r);
    r = it_request("GET", HOOKS "/999999/deliveries", &(it_request_opts){.token = admin_acme});
    CHECK_PROBLEM(r, 404, "webhook_not_found");
    it_response_free(&r);
    r = it_request("GET", HOOKS "/abc", &(it_request_opts){.token = admin_acme});
    CHECK_PROBLEM(r, 404, "webhook_not_found");
    it_response_free(&r);
    /* another namespace's admin, on its own path, does not find acme's subscription */
    snprintf(path, sizeof path, "/v1/namespaces/other/webhooks/%lld", id);
    r = it_request("GET", path, &(it_request_opts){.token = admin_other});
    CHECK_PROBLEM(r, 404, "webhook_not_found");
    it_response_free(&r);
}

TEST(refusals)
{
    static const struct {
        const char *body;
        int status;
        const char *reason;
    } cases[] = {
        {"{\"url\":\"http://127.0.0.1:9/h\",\"events\":[\"model.created\"]}", 422,
         "webhook_address_forbidden"},
        {"{\"url\":\"http://[::1]/h\",\"events\":[\"model.created\"]}", 422,
         "webhook_address_forbidden"},
        {"{\"url\":\"http://169.254.169.254/latest\",\"events\":[\"model.created\"]}", 422,
         "webhook_address_forbidden"},
        {"{\"url\":\"http://10.1.2.3/h\",\"events\":[\"model.created\"]}", 422,
         "webhook_address_forbidden"},
        {"{\"url\":\"ftp://93.184.216.34/h\",\"events\":[\"model.created\"]}", 400,
         "webhook_url_invalid"},
        {"{\"url\":\"not a url\",\"events\":[\"model.created\"]}", 400, "webhook_url_invalid"},
        {"{\"events\":[\"model.created\"]}", 400, "webhook_url_invalid"},
        {"{\"url\":\"http://93.184.216.34/h\"}", 400, "webhook_events_invalid"},
        {"{\"url\":\"http://93.184.216.34/h\",\"events\":[]}", 400, "webhook_events_invalid"},
        {"{\"url\":\"http://93.184.216.34/h\",\"events\":[\"ping\"]}", 400,
         "webhook_events_invalid"},
        {"{\"url\":\"http://93.184.216.34/h\",\"events\":[\"alias.moved\",\"alias.moved\"]}", 400,
         "webhook_events_invalid"},
        {"{\"url\":\"http://93.184.216.34/h\",\"events\":[1]}", 400, "webhook_events_invalid"},
        {"{\"url\":\"http://93.184.216.34/h\",\"events\":[\"model.created\"],\"secret\":\"short\"}",
         400, "webhook_secret_invalid"},
        {"{\"url\":\"http://93.184.216.34/h\",\"events\":[\"model.created\"],"
         "\"secret\":\"has a space in it ok\"}",
         400, "webhook_secret_invalid"},
        {"{\"url\":\"http://93.184.216.34/h\",\"events\":[\"model.created\"],\"extra\":1}", 400,
         "invalid_request"},
        {"[1]", 400, "invalid_json"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        it_response r = it_send_json("POST", HOOKS, admin_acme, cases[i].body);
        if (r.status != cases[i].status)
            fprintf(stderr, "  %s -> %ld %s\n", cases[i].body, r.status,
                    r.body.data ? (const char *)r.body.data : "");
        CHECK_PROBLEM(r, cases[i].status, cases[i].reason);
        it_response_free(&r);
    }
    it_response r = it_send_json("POST", "/v1/namespaces/bad..name/webhooks", admin_acme, "{}");
    CHECK(r.status == 400 || r.status == 403);
    it_response_free(&r);
}

TEST(tokens)
{
    const char *body = "{\"url\":\"http://93.184.216.34/h\",\"events\":[\"model.created\"]}";
    it_response r = it_send_json("POST", HOOKS, NULL, body);
    CHECK_STATUS(r, 401);
    it_response_free(&r);
    r = it_send_json("POST", HOOKS, write_acme, body);
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_send_json("POST", HOOKS, read_acme, body);
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_send_json("POST", HOOKS, admin_other, body);
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_request("GET", HOOKS, &(it_request_opts){.token = admin_other});
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_request("GET", HOOKS, &(it_request_opts){.token = NULL});
    CHECK_STATUS(r, 401);
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    static const char *const flags[] = {"--webhook-workers", "0", NULL};
    it_init(argc, argv, flags);
    admin_acme = it_token("admin", "acme");
    admin_other = it_token("admin", "other");
    write_acme = it_token("write", "acme");
    read_acme = it_token("read", "acme");
    RUN(create_get_list_update_delete);
    RUN(ping_deliveries_redeliver);
    RUN(refusals);
    RUN(tokens);
    return it_finish(argv[0]);
}
