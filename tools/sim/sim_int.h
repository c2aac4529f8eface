/* sim_int.h -- internals shared by the files of tools/sim/. */
#ifndef KVT_SIM_INT_H
#define KVT_SIM_INT_H
#include <stdbool.h>
#include <stddef.h>

struct kvt_trace;

/* Writes an SVG of hit ratio against capacity (log scale): one line per policy, plus OPT.
 * hr[p * stride + c] is policy p at caps[c]. @return : 0 or -errno. */
int kvt__sim_plot(const char *path, char *const *pols, size_t n_pols, const size_t *caps,
                  size_t n_caps, const double *hr, size_t stride, const double *opt);

/* --mrc: for each capacity, the SHARDS curve (policy/mrc.h, at sample_rate) at 1/2x..8x beside
 * an exact LRU replay at each size; a table or JSON lines on stdout. @return : 0 or -errno. */
int kvt__sim_mrc(const struct kvt_trace *t, const size_t *caps, size_t n_caps, double rate,
                 bool json);
#endif
