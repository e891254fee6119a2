/*
 * device.c - see device.h.
 */
#include "device.h"

#include <string.h>

#ifdef WITH_CUDA            /* the CUDA build of this file: build/cuda/device.o */
#include "gpu.h"
#endif

int device_check(const char *name, Error *err)
{
    if (strcmp(name, "cpu") == 0) return 0;
    if (strcmp(name, "cuda") != 0) return error_set(err, "--device: '%s' is not cpu or cuda", name);
#ifdef WITH_CUDA
    return 0;
#else
    return error_set(err, "--device cuda: this program is built without CUDA; build/cuda/ has "
                          "the CUDA build (make cuda)");
#endif
}

int device_open(const char *name, StepDevice *d, const Model *m, const AdamState *opt, int N,
                int S, int T, Error *err)
{
    memset(d, 0, sizeof *d);
    if (device_check(name, err) != 0) return -1;
    if (strcmp(name, "cpu") == 0) return 0;
#ifdef WITH_CUDA
    return gpu_step_device_open(d, m, opt, N, S, T, err);
#else
    (void)m, (void)opt, (void)N, (void)S, (void)T;
    return -1;
#endif
}
