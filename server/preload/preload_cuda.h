/* The CUDA preload backend beyond the common constructor in preload_backend.h:
 * a constructor that loads the driver from a given path, and one that takes a
 * driver table filled by hand (the unit test's fake driver). */
#ifndef TG_PRELOAD_CUDA_H
#define TG_PRELOAD_CUDA_H

#include "cuda_driver.h"
#include "preload_backend.h"

/* Copy streams per device: the backend's `streams`. */
#define TG_PRELOAD_CUDA_STREAMS 4

/* As tg_preload_cuda_backend(), which is this with TG_CUDA_DRIVER_LIBRARY. */
tg_device_backend *tg_preload_cuda_backend_from(const char *library_path);

#ifdef TG_HAVE_CUDA_H
/* A backend over a driver table the caller filled (driver->library may be NULL).
 * The table is copied; with a library, the backend owns and never dlcloses it. It
 * calls init(0) and enumerates devices at once, as the dlopen'd one does. */
tg_device_backend *tg_preload_cuda_backend_with_driver(const tg_cuda_driver *driver);
#endif

#endif
