/* gpu_int.h -- shared between the runtimes and the host stand-in. */
#ifndef KVT_GPU_INT_H
#define KVT_GPU_INT_H
#include "gpu.h"

#include <stdbool.h>

/* Whether len bytes at off lie inside m (the check of every copy). */
static inline bool kvt_gpu_range_fits(const struct kvt_gpu_mem *m, size_t off, size_t len)
{
	return off <= m->bytes && len <= m->bytes - off;
}
void kvt_hostmem_free_if_host(struct kvt_gpu_mem *m);
int kvt_hostmem_copy_to(struct kvt_gpu_mem *m, size_t off, const void *src, size_t len);
int kvt_hostmem_copy_from(const struct kvt_gpu_mem *m, size_t off, void *dst, size_t len);
/* Whether every piece lies inside m. */
bool kvt_gpu_pieces_fit(const struct kvt_gpu_mem *m, const struct kvt_gpu_piece *v, size_t n);
/* The batched copies of the host stand-in (to: host to m). */
int kvt_hostmem_copy_many(const struct kvt_gpu_mem *m, int to, const struct kvt_gpu_piece *v,
                          size_t n);
#endif
