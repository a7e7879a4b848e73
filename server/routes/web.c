/* The web page: GET / (web/index.html) and its assets under /ui/ (web/app.js,
 * web/style.css), compiled into the binary (scripts/embed.sh, common/embedded.h).
 * The page reads the JSON API only; these routes serve fixed bytes with a strict
 * Content-Security-Policy (scripts and styles from this origin only, nothing
 * inline, no framing), nosniff, and an ETag (the first 16 hex of the bytes'
 * SHA-256, computed once) with 304 for If-None-Match. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "embedded.h"
#include "http.h"
#include "routes.h"
#include "sha256.h"

typedef struct web_file {
    const char *name; /* under /ui/, or "" for / */
    const unsigned char *bytes;
    const size_t *len;
    const char *type;
    char etag[24]; /* "\"" + 16 hex + "\"" */
} web_file;

static web_file files[] = {
    {"", tg_web_index_html, &tg_web_index_html_len, "text/html; charset=utf-8", ""},
    {"app.js", tg_web_app_js, &tg_web_app_js_len, "text/javascript; charset=utf-8", ""},
    {"style.css", tg_web_style_css, &tg_web_style_css_len, "text/css; charset=utf-8", ""},
};

static pthread_once_t etags_once = PTHREAD_ONCE_INIT;

static void make_etags(void)
{
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char hex[2 * TG_SHA256_SIZE + 1];
        if (tg_sha256_hex(files[i].bytes, *files[i].len, hex, "etag") != 0) {
            files[i].etag[0] = '\0'; /* no validator: every GET sends the bytes */
            continue;
        }
        snprintf(files[i].etag, sizeof files[i].etag, "\"%.16s\"", hex);
    }
}

/* If-None-Match holds etag (or "*"): a list of quoted tags, weak ones compared weakly. */
static bool etag_listed(const char *header, const char *etag)
{
    if (header == NULL || etag[0] == '\0')
        return false;
    size_t n = strlen(etag);
    for (const char *p = header; *p != '\0';) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (*p == '*')
            return true;
        if (p[0] == 'W' && p[1] == '/')
            p += 2;
        if (strncmp(p, etag, n) == 0 && (p[n] == '\0' || p[n] == ',' || p[n] == ' '))
            return true;
        while (*p != '\0' && *p != ',')
            p++;
    }
    return false;
}

static void add_headers(struct MHD_Response *response, const web_file *f)
{
    MHD_add_response_header(response, "Content-Security-Policy",
                            "default-src 'none'; script-src 'self'; style-src 'self'; "
                            "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
                            "form-action 'self'; frame-ancestors 'none'");
    MHD_add_response_header(response, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(response, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(response, "X-Frame-Options", "DENY");
    /* revalidated each time (a new binary brings new bytes), cheaply with the ETag */
    MHD_add_response_header(response, "Cache-Control", "no-cache");
    if (f->etag[0] != '\0')
        MHD_add_response_header(response, "ETag", f->etag);
}

static void serve(tg_request *req, const web_file *f)
{
    pthread_once(&etags_once, make_etags);
    if (etag_listed(tg_header(req, "If-None-Match"), f->etag)) {
        struct MHD_Response *response =
            MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
        if (response != NULL)
            add_headers(response, f);
        tg_respond(req, 304, response, 0);
        return;
    }
    struct MHD_Response *response = MHD_create_response_from_buffer(
        *f->len, (void *)(uintptr_t)f->bytes, MHD_RESPMEM_PERSISTENT);
    if (response != NULL) {
        MHD_add_response_header(response, "Content-Type", f->type);
        add_headers(response, f);
    }
    tg_respond(req, 200, response, *f->len);
}

void tg_route_web_index(tg_request *req)
{
    serve(req, &files[0]);
}

void tg_route_web_asset(tg_request *req)
{
    const char *asset = tg_param(req, "path");
    for (size_t i = 1; asset != NULL && i < sizeof files / sizeof files[0]; i++)
        if (strcmp(asset, files[i].name) == 0) {
            serve(req, &files[i]);
            return;
        }
    tg_respond_problem(req, "asset_not_found", "no asset '/ui/%.64s'", asset ? asset : "");
}
