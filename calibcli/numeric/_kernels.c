/* Compiled kernels of calibcli, loaded with ctypes (no Python C-API): built at install time
 * when a C compiler is present; every caller has a numpy path that gives the same bytes.
 *
 * Compiled without FMA contraction and without fast-math, so each operation rounds exactly
 * as numpy's does.
 */
#include <stdint.h>

/* out[i] = np.interp(x[i], xp, fp) for k >= 2 strictly increasing finite knots, by the grid of
 * `_lookup._table`: start[c] is a knot at or below cell c's left edge (ncell entries),
 * xp_next[j] = xp[j + 1] (+inf for the last knot) and slope[j] numpy's slope of interval j.
 * NaN queries give the query itself, as np.interp does. */
void calib_interp(const double *x, int64_t n, const double *xp, const double *fp,
                  const double *slope, const double *xp_next, int64_t k,
                  const int64_t *start, int64_t ncell, double scale, double *out)
{
    const double lo = xp[0], hi = xp[k - 1];
    for (int64_t i = 0; i < n; i++) {
        const double v = x[i];
        if (v != v) {
            out[i] = v;
            continue;
        }
        const double xc = v < lo ? lo : (v > hi ? hi : v);
        int64_t cell = (int64_t)((xc - lo) * scale);
        if (cell >= ncell)
            cell = ncell - 1;
        int64_t j = start[cell];
        while (j < k - 1 && xc >= xp_next[j])
            j++;
        out[i] = slope[j] * (xc - xp[j]) + fp[j];
    }
}
