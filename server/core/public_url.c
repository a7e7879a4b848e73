/* The server's public address (see public_url.h). */
#include "public_url.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "addr_policy.h"
#include "request.h"

static bool is_alnum(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* A port: 1 to 5 digits, 1..65535. */
static bool is_port(const char *text)
{
    size_t len = strlen(text);
    unsigned value = 0;
    if (len == 0 || len > 5)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (text[i] < '0' || text[i] > '9')
            return false;
        value = value * 10 + (unsigned)(text[i] - '0');
    }
    return value >= 1 && value <= 65535;
}

bool tg_host_port_valid(const char *text)
{
    size_t len = text != NULL ? strlen(text) : 0;
    if (len == 0 || len >= TG_HOST_PORT_MAX)
        return false;
    const char *p = text;
    if (*p == '[') {
        for (p++; *p != ']'; p++)
            if (*p == '\0' || !(is_alnum(*p) || *p == ':' || *p == '.'))
                return false;
        if (p == text + 1)
            return false;
        p++;
    } else {
        const char *begin = p;
        while (is_alnum(*p) || *p == '.' || *p == '-')
            p++;
        if (p == begin)
            return false;
    }
    if (*p == '\0')
        return true;
    return *p == ':' && is_port(p + 1);
}

/* The characters of a URL path prefix (RFC 3986 pchar and '/'). */
static bool is_path_char(char c)
{
    return is_alnum(c) || strchr("/-._~%!$&'()*+,;=:@", c) != NULL;
}

int tg_public_url_normalize(const char *text, char *out, size_t cap, char *err, size_t err_len)
{
    const char *scheme = NULL, *rest = NULL;
    if (strncasecmp(text, "http://", 7) == 0) {
        scheme = "http";
        rest = text + 7;
    } else if (strncasecmp(text, "https://", 8) == 0) {
        scheme = "https";
        rest = text + 8;
    } else {
        snprintf(err, err_len, "'%s' is not an http:// or https:// URL", text);
        return -1;
    }
    size_t authority_len = strcspn(rest, "/");
    char host[TG_HOST_PORT_MAX];
    if (authority_len >= sizeof host) {
        snprintf(err, err_len, "the host of '%s' is too long", text);
        return -1;
    }
    memcpy(host, rest, authority_len);
    host[authority_len] = '\0';
    if (!tg_host_port_valid(host)) {
        snprintf(err, err_len,
                 "'%s' does not name a host[:port] (a DNS name, an IPv4 address or a "
                 "[bracketed] IPv6 address; no user, query or fragment)",
                 text);
        return -1;
    }
    const char *path = rest + authority_len;
    size_t path_len = strlen(path);
    for (size_t i = 0; i < path_len; i++)
        if (!is_path_char(path[i])) {
            snprintf(err, err_len,
                     "the path of '%s' holds a character a URL path prefix may not "
                     "(a query, a fragment, a space or a control character)",
                     text);
            return -1;
        }
    while (path_len > 0 && path[path_len - 1] == '/')
        path_len--;
    if ((size_t)snprintf(out, cap, "%s://%s%.*s", scheme, host, (int)path_len, path) >= cap) {
        snprintf(err, err_len, "'%s' is longer than %zu bytes", text, cap - 1);
        return -1;
    }
    return 0;
}

/* The last comma-separated value of a header, trimmed, into out; false when empty. */
static bool last_value(const char *header, char *out, size_t cap)
{
    if (header == NULL)
        return false;
    const char *begin = strrchr(header, ',');
    begin = begin != NULL ? begin + 1 : header;
    while (*begin == ' ' || *begin == '\t')
        begin++;
    size_t len = strlen(begin);
    while (len > 0 && (begin[len - 1] == ' ' || begin[len - 1] == '\t'))
        len--;
    if (len == 0 || len >= cap)
        return false;
    memcpy(out, begin, len);
    out[len] = '\0';
    return true;
}

/* A parameter (name=value or name="value") of one Forwarded element into out. */
static bool forwarded_param(const char *element, const char *name, char *out, size_t cap)
{
    size_t name_len = strlen(name);
    for (const char *p = element; *p != '\0';) {
        while (*p == ' ' || *p == '\t' || *p == ';')
            p++;
        size_t pair_len = strcspn(p, ";");
        if (pair_len > name_len && strncasecmp(p, name, name_len) == 0 && p[name_len] == '=') {
            const char *value = p + name_len + 1;
            size_t len = pair_len - name_len - 1;
            while (len > 0 && (value[len - 1] == ' ' || value[len - 1] == '\t'))
                len--;
            if (len >= 2 && value[0] == '"' && value[len - 1] == '"') {
                value++;
                len -= 2;
            }
            if (len == 0 || len >= cap)
                return false;
            memcpy(out, value, len);
            out[len] = '\0';
            return true;
        }
        p += pair_len;
    }
    return false;
}

/* "http" or "https" (any case) into proto; anything else leaves it. */
static void take_proto(const char *value, char *proto)
{
    if (strcasecmp(value, "http") == 0 || strcasecmp(value, "https") == 0)
        snprintf(proto, 6, "%s", strcasecmp(value, "http") == 0 ? "http" : "https");
}

/* True when host (valid) ends with a port: "h:1", "[::1]:1", not "[::1]". */
static bool has_port(const char *host)
{
    const char *colon = strrchr(host, ':');
    const char *bracket = strrchr(host, ']');
    return colon != NULL && (bracket == NULL || colon > bracket);
}

void tg_forwarded_origin(const char *forwarded, const char *x_proto, const char *x_host,
                         const char *x_port, char *proto, char *host)
{
    char element[1024], value[TG_HOST_PORT_MAX];
    if (last_value(forwarded, element, sizeof element)) {
        if (forwarded_param(element, "proto", value, sizeof value))
            take_proto(value, proto);
        if (forwarded_param(element, "host", value, sizeof value) && tg_host_port_valid(value))
            snprintf(host, TG_HOST_PORT_MAX, "%s", value);
        return;
    }
    if (last_value(x_proto, value, sizeof value))
        take_proto(value, proto);
    if (!last_value(x_host, value, sizeof value) || !tg_host_port_valid(value))
        return;
    char port[8];
    bool default_port = false;
    if (last_value(x_port, port, sizeof port) && is_port(port))
        default_port = strcmp(port, strcmp(proto, "https") == 0 ? "443" : "80") == 0;
    else
        port[0] = '\0';
    char joined[TG_HOST_PORT_MAX + sizeof port];
    if (port[0] != '\0' && !default_port && !has_port(value))
        snprintf(joined, sizeof joined, "%s:%s", value, port);
    else
        snprintf(joined, sizeof joined, "%s", value);
    size_t len = strlen(joined);
    if (len < TG_HOST_PORT_MAX)
        memcpy(host, joined, len + 1);
}

void tg_request_origin(const tg_request *req, char *out, size_t cap)
{
    const tg_config *config = &req->server->config;
    if (config->public_url[0] != '\0') {
        snprintf(out, cap, "%s", config->public_url);
        return;
    }
    char proto[6] = "http", host[TG_HOST_PORT_MAX] = "";
    if (tg_addr_policy_lists(&config->trusted_proxies, req->client))
        tg_forwarded_origin(tg_header(req, "Forwarded"), tg_header(req, "X-Forwarded-Proto"),
                            tg_header(req, "X-Forwarded-Host"), tg_header(req, "X-Forwarded-Port"),
                            proto, host);
    const char *header = tg_header(req, "Host");
    if (host[0] == '\0' && tg_host_port_valid(header))
        snprintf(host, sizeof host, "%s", header);
    if (host[0] == '\0')
        snprintf(host, sizeof host, "127.0.0.1:%u", (unsigned)req->server->port);
    snprintf(out, cap, "%s://%s", proto, host);
}

void tg_request_public_path(const tg_request *req, const char *path, char *out, size_t cap)
{
    const char *url = req->server->config.public_url;
    const char *prefix = "";
    if (url[0] != '\0') {
        const char *authority = strstr(url, "://");
        prefix = authority != NULL ? authority + 3 + strcspn(authority + 3, "/") : "";
    }
    snprintf(out, cap, "%s%s", prefix, path);
}
