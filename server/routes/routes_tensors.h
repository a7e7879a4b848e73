/* .../versions/{rev}/tensors (list) and .../versions/{rev}/tensors/{tensor*} (bytes),
 * listed in http.c's routing table. */
#ifndef TG_ROUTES_TENSORS_H
#define TG_ROUTES_TENSORS_H

#include "http.h"

void tg_route_tensors_list(tg_request *req);
void tg_route_tensor_get(tg_request *req);

#endif
