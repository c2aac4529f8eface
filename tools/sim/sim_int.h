/* sim_int.h -- internals shared by the files of tools/sim/. */
#ifndef KVT_SIM_INT_H
#define KVT_SIM_INT_H
#include <stddef.h>

/* Writes an SVG of hit ratio against capacity (log scale): one line per policy, plus OPT.
 * hr[p * stride + c] is policy p at caps[c]. @return : 0 or -errno. */
int kvt__sim_plot(const char *path, char *const *pols, size_t n_pols, const size_t *caps,
                  size_t n_caps, const double *hr, size_t stride, const double *opt);
#endif
