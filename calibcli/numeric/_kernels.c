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

/* The multicalibration error's path ranges (calibcli/evaluation/metrics/segment_paths.py,
 * `path_extremes`), with the arithmetic of its numpy path operation for operation, so both give
 * the same bytes. Rows are in ascending p (`ps`), `d` = w (y - p), `cell` each row's cell;
 * combination j sends cell c to its segment lut[j * ncell + c] (0 .. nseg[j] - 1), its
 * segments' outputs are consecutive (the first at the sum of the earlier nseg). Per block
 * [bounds[b], bounds[b + 1]) and combination, the rows are ordered by (segment, position), as
 * numpy's sort of the packed keys orders them (a stable counting sort here, in four quarters
 * of the block at once); a running sum c goes through them all (the first row starts it), and
 * each segment's block total, highest and lowest c (read where the next row of the segment
 * has another p, or at its last row) are taken relative to c before it. Across blocks: incl,
 * the running (inclusive) sum of a segment's block totals, and top/bottom the extremes of
 * (incl - total) + extreme; a segment without rows in a block counts its offset + 0.
 * out = max(top, 0) - min(bottom, 0) + 0 (no negative zero).
 * Scratch: seg, sd and sp (the longest block), count (4 * (the largest nseg + 1)), incl, top
 * and bottom (one per output). */
static void fold(int64_t b, int64_t o, double sum, double high, double low, double *incl, double *top,
                 double *bottom)
{
    if (b == 0) {
        incl[o] = sum;
        top[o] = (incl[o] - sum) + high;
        bottom[o] = (incl[o] - sum) + low;
    } else {
        incl[o] = incl[o] + sum;
        const double offset = incl[o] - sum;
        const double h = offset + high, l = offset + low;
        top[o] = h > top[o] ? h : top[o];
        bottom[o] = l < bottom[o] ? l : bottom[o];
    }
}

void calib_segment_ranges(const double *d, const double *ps, const uint32_t *cell, int64_t n,
                          const int64_t *bounds, int64_t nb, const int32_t *lut, int64_t ncell,
                          const int64_t *nseg, int64_t ncombo, int32_t *seg, double *sd, double *sp,
                          int64_t *count, double *incl, double *top, double *bottom, double *out)
{
    int64_t total = 0, kmax = 1;
    for (int64_t j = 0; j < ncombo; j++) {
        total += nseg[j];
        kmax = nseg[j] > kmax ? nseg[j] : kmax;
    }
    (void)n;
    int64_t *cnt[4];
    for (int q = 0; q < 4; q++)
        cnt[q] = count + q * (kmax + 1);
    for (int64_t b = 0; b < nb; b++) {
        const int64_t lo = bounds[b], hi = bounds[b + 1], m = hi - lo;
        int ties = 0;
        for (int64_t i = lo + 1; i < hi && !ties; i++)
            ties = ps[i] == ps[i - 1];
        int64_t at = 0;
        for (int64_t j = 0; j < ncombo; j++) {
            const int64_t k = nseg[j];
            const int32_t *map = lut + j * ncell;
            const double *xd = d + lo, *xp = ps + lo;
            if (k > 1) {
                /* stable counting sort by segment: quarters [qL, (q + 1)L) (the last to m) */
                const int64_t L = m / 4;
                for (int q = 0; q < 4; q++)
                    for (int64_t s = 0; s <= k; s++)
                        cnt[q][s] = 0;
                for (int64_t i = 0; i < L; i++) {
                    const int32_t s0 = map[cell[lo + i]], s1 = map[cell[lo + L + i]];
                    const int32_t s2 = map[cell[lo + 2 * L + i]], s3 = map[cell[lo + 3 * L + i]];
                    seg[i] = s0; seg[L + i] = s1; seg[2 * L + i] = s2; seg[3 * L + i] = s3;
                    cnt[0][s0]++; cnt[1][s1]++; cnt[2][s2]++; cnt[3][s3]++;
                }
                for (int64_t i = 4 * L; i < m; i++) {
                    const int32_t s = map[cell[lo + i]];
                    seg[i] = s;
                    cnt[3][s]++;
                }
                int64_t at_ = 0;  /* cnt[q][s] becomes where quarter q's rows of segment s go */
                for (int64_t s = 0; s < k; s++)
                    for (int q = 0; q < 4; q++) {
                        const int64_t c_ = cnt[q][s];
                        cnt[q][s] = at_;
                        at_ += c_;
                    }
                if (ties) {  /* p is read in the pass below only where the block has ties */
                    for (int64_t i = 0; i < L; i++) {
                        int64_t t;
                        t = cnt[0][seg[i]]++; sd[t] = xd[i]; sp[t] = xp[i];
                        t = cnt[1][seg[L + i]]++; sd[t] = xd[L + i]; sp[t] = xp[L + i];
                        t = cnt[2][seg[2 * L + i]]++; sd[t] = xd[2 * L + i]; sp[t] = xp[2 * L + i];
                        t = cnt[3][seg[3 * L + i]]++; sd[t] = xd[3 * L + i]; sp[t] = xp[3 * L + i];
                    }
                } else {
                    for (int64_t i = 0; i < L; i++) {
                        sd[cnt[0][seg[i]]++] = xd[i];
                        sd[cnt[1][seg[L + i]]++] = xd[L + i];
                        sd[cnt[2][seg[2 * L + i]]++] = xd[2 * L + i];
                        sd[cnt[3][seg[3 * L + i]]++] = xd[3 * L + i];
                    }
                }
                for (int64_t i = 4 * L; i < m; i++) {
                    const int64_t t = cnt[3][seg[i]]++;
                    sd[t] = xd[i];
                    sp[t] = xp[i];
                }
                xd = sd;
                xp = sp;
                /* cnt[3][s] is now the end of segment s */
            }
            double c = 0.0;
            int64_t t = 0;
            for (int64_t s = 0; s < k; s++) {
                const int64_t end = k > 1 ? cnt[3][s] : m;
                const double base = c;
                double sum, high = 0.0, low = 0.0;
                if (t < end) {
                    high = -1.0 / 0.0;
                    low = 1.0 / 0.0;
                    if (ties) {
                        for (; t < end; t++) {
                            c = t == 0 ? xd[t] : c + xd[t];
                            if (t + 1 == end || xp[t + 1] != xp[t]) {
                                high = c > high ? c : high;
                                low = c < low ? c : low;
                            }
                        }
                    } else {
                        for (; t < end; t++) {
                            c = t == 0 ? xd[t] : c + xd[t];
                            high = c > high ? c : high;
                            low = c < low ? c : low;
                        }
                    }
                    high = high - base;
                    low = low - base;
                }
                sum = c - base;
                fold(b, at + s, sum, high, low, incl, top, bottom);
            }
            at += k;
        }
    }
    for (int64_t o = 0; o < total; o++) {
        const double t_ = nb ? (top[o] > 0.0 ? top[o] : 0.0) : 0.0;
        const double b_ = nb ? (bottom[o] < 0.0 ? bottom[o] : 0.0) : 0.0;
        out[o] = (t_ - b_) + 0.0;
    }
}

/* Per-cell sums of the multicalibration error (`segment_plan.cell_sums`) in row order, as
 * np.bincount adds them: wsum (weights; the row counts when w is NULL), v (w^2 p (1 - p), as
 * ((p (1 - p)) w) w), wp (w p), wy (w y). The outputs start at zero. */
void calib_cell_sums(const uint32_t *cell, int64_t n, const uint8_t *y, const double *p, const double *w,
                     double *wsum, double *v, double *wp, double *wy)
{
    for (int64_t i = 0; i < n; i++) {
        const uint32_t c = cell[i];
        const double q = p[i] * (1.0 - p[i]);
        if (w) {
            const double wi = w[i];
            wsum[c] += wi;
            v[c] += (q * wi) * wi;
            wp[c] += wi * p[i];
            wy[c] += wi * (double)y[i];
        } else {
            wsum[c] += 1.0;
            v[c] += q;
            wp[c] += p[i];
            wy[c] += (double)y[i];
        }
    }
}

/* `segment_paths.order_by_p`'s sort keys, as its numpy path builds them:
 * key[i] = ((bits of p[i]) << 2 & ~(2^ib - 1)) | i. */
void calib_order_keys(const uint64_t *pbits, int64_t n, int64_t ib, uint64_t *key)
{
    const uint64_t low = (((uint64_t)1) << ib) - 1;
    for (int64_t i = 0; i < n; i++)
        key[i] = ((pbits[i] << 2) & ~low) | (uint64_t)i;
}

/* After the sort of those keys: each row's index and its p. */
void calib_order_unpack(const uint64_t *key, int64_t n, int64_t ib, const double *p, int64_t *order, double *ps)
{
    const uint64_t low = (((uint64_t)1) << ib) - 1;
    for (int64_t i = 0; i < n; i++) {
        const int64_t o = (int64_t)(key[i] & low);
        order[i] = o;
        ps[i] = p[o];
    }
}

/* The rows in ascending p for the paths (`multicalibration._sums_and_paths`):
 * d[i] = (y[o] - ps[i]) (times w[o]) and cells[i] = ids[o], o = order[i]; ids of `width` bytes. */
void calib_sorted_rows(const int64_t *order, int64_t n, const uint8_t *y, const double *ps, const double *w,
                       const void *ids, int64_t width, double *d, uint32_t *cells)
{
    const uint16_t *ids16 = (const uint16_t *)ids;
    const uint32_t *ids32 = (const uint32_t *)ids;
    for (int64_t i = 0; i < n; i++) {
        const int64_t o = order[i];
        double v = (double)y[o] - ps[i];
        if (w)
            v *= w[o];
        d[i] = v;
        cells[i] = width == 2 ? ids16[o] : ids32[o];
    }
}

/* `segment_plan.run_sums`: per key = rank[code[i]] * ncell + id[i] (ids of `width` bytes), in
 * row order as np.bincount adds them: rows; and sum w y (w NULL: sum y), sum w, sum w^2 (w given).
 * The outputs (distinct p x ncell entries) start at zero. */
void calib_run_sums(const int32_t *code, const int64_t *rank, const void *ids, int64_t width, int64_t n,
                    int64_t ncell, const uint8_t *y, const double *w, int64_t *rows, double *swy, double *sw,
                    double *sw2)
{
    const uint16_t *ids16 = (const uint16_t *)ids;
    const uint32_t *ids32 = (const uint32_t *)ids;
    for (int64_t i = 0; i < n; i++) {
        const int64_t key = rank[code[i]] * ncell + (width == 2 ? ids16[i] : ids32[i]);
        rows[key]++;
        if (w) {
            const double wi = w[i];
            sw[key] += wi;
            sw2[key] += wi * wi;
            swy[key] += wi * (double)y[i];
        } else {
            swy[key] += (double)y[i];
        }
    }
}
