/* plot.c -- a dependency-free SVG line chart for `kvtier sim --plot`. */
#include "sim_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>

#define W 720
#define H 440
#define L 60
#define B 50

static const char *const colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

static double xpos(size_t cap, size_t lo, size_t hi)
{
	if (hi <= lo)
		return L + (W - L - 20) / 2.0;
	return L + (W - L - 20) * (log((double)cap) - log((double)lo)) /
	               (log((double)hi) - log((double)lo));
}

static double ypos(double r, double top)
{
	return (H - B) - (H - B - 20) * (r / top);
}

static void line(FILE *f, const char *name, const char *colour, const size_t *caps, size_t n,
                 const double *v, size_t lo, size_t hi, double top, size_t idx)
{
	fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", colour);
	for (size_t c = 0; c < n; c++)
		fprintf(f, "%.1f,%.1f ", xpos(caps[c], lo, hi), ypos(v[c], top));
	fprintf(f, "\"/>\n<text x=\"%d\" y=\"%zu\" fill=\"%s\" font-size=\"12\">%s</text>\n",
	        L + 10, 30 + 16 * idx, colour, name);
}

int kvt__sim_plot(const char *path, char *const *pols, size_t n_pols, const size_t *caps,
                  size_t n_caps, const double *hr, size_t stride, const double *opt)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	size_t lo = caps[0] ? caps[0] : 1, hi = lo;
	double top = 0.05;
	for (size_t c = 0; c < n_caps; c++) {
		lo = caps[c] && caps[c] < lo ? caps[c] : lo;
		hi = caps[c] > hi ? caps[c] : hi;
		top = opt[c] > top ? opt[c] : top;
	}
	top = ceil(top * 10.0) / 10.0;
	fprintf(f,
	        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
	        "font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" "
	        "fill=\"white\"/>\n",
	        W, H);
	fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, H - B,
	        W - 20, H - B);
	fprintf(f, "<line x1=\"%d\" y1=\"20\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, L,
	        H - B);
	for (int k = 0; k <= 4; k++)
		fprintf(f, "<text x=\"10\" y=\"%.1f\" font-size=\"11\">%.2f</text>\n",
		        ypos(top * k / 4, top) + 4, top * k / 4);
	for (size_t c = 0; c < n_caps; c++)
		fprintf(f,
		        "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" "
		        "text-anchor=\"middle\">%zu</text>\n",
		        xpos(caps[c], lo, hi), H - B + 16, caps[c]);
	fprintf(f,
	        "<text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">capacity "
	        "(blocks, log scale) vs block hit ratio</text>\n",
	        W / 2, H - 12);
	for (size_t p = 0; p < n_pols; p++)
		line(f, pols[p], colours[p % 10], caps, n_caps, hr + p * stride, lo, hi, top, p);
	line(f, "OPT (MIN)", "black", caps, n_caps, opt, lo, hi, top, n_pols);
	fprintf(f, "</svg>\n");
	return fclose(f) ? -errno : 0;
}
