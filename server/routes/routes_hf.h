/* Read routes the Hugging Face Hub clients use (docs/DESIGN.md §4), so HF_ENDPOINT
 * (huggingface_hub) and hubUrl (@huggingface/hub) can point at tensorgate:
 * /{org}/{name}/resolve|raw/{rev}/{path}, /api/models[...]. Only published
 * versions are visible here: a Hub revision needs a commit id (the version digest). */
#ifndef TG_ROUTES_HF_H
#define TG_ROUTES_HF_H

#include "http.h"

/* GET|HEAD /{org}/{name}/resolve/{rev}/{path*} and /{org}/{name}/raw/{rev}/{path*} */
void tg_route_hf_file(tg_request *req);
/* GET /api/models: ?search= ?limit= ?cursor=, Link: <absolute>; rel="next" */
void tg_route_hf_models_list(tg_request *req);
/* GET /api/models/{org}/{name} and /api/models/{org}/{name}/revision/{rev} */
void tg_route_hf_model_info(tg_request *req);
/* GET /api/models/{org}/{name}/tree/{rev}[/{path*}]: ?recursive= ?limit= ?cursor= */
void tg_route_hf_tree(tg_request *req);

/* The Hub's revision names mapped to tensorgate's {rev}: "main" and "HEAD" (the
 * clients' defaults) mean "latest"; anything else passes through. */
const char *tg_hf_revision(const char *rev);

#endif
