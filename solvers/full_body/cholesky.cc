// The in-place Cholesky factorisations of cholesky.h.

#include "solvers/full_body/cholesky.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cmath>

namespace reach {
namespace full_body_internal {
namespace {

// Subtracts from column j of the factor at `a` (entries j..n-1) the
// updates of its final columns k_begin..k_end-1, four columns per pass
// (the passes are short, n ~ 20).
// Two rows at a time in SSE2 registers, unaligned: each entry takes the
// same operations in the same order as one at a time (no fused
// multiply-add), so the factor is bit for bit the scalar loop's; the
// compiler's own vectorisation of these short loops spent as many
// instructions peeling for alignment as on the sums (issue 40). Without
// SSE2 the scalar loops do it all.
inline __attribute__((always_inline)) void CholeskyUpdate(
    double* a, Eigen::Index stride, int n, int j, int k_begin, int k_end) {
  double* __restrict cj = a + j * stride;
  int k = k_begin;
  for (; k + 4 <= k_end; k += 4) {
    const double* __restrict c0 = a + k * stride;
    const double* __restrict c1 = c0 + stride;
    const double* __restrict c2 = c1 + stride;
    const double* __restrict c3 = c2 + stride;
    const double f0 = c0[j], f1 = c1[j], f2 = c2[j], f3 = c3[j];
    int i = j;
#ifdef __SSE2__
    const __m128d g0 = _mm_set1_pd(f0), g1 = _mm_set1_pd(f1);
    const __m128d g2 = _mm_set1_pd(f2), g3 = _mm_set1_pd(f3);
    for (; i + 2 <= n; i += 2) {
      const __m128d s01 = _mm_add_pd(_mm_mul_pd(_mm_loadu_pd(c0 + i), g0),
                                     _mm_mul_pd(_mm_loadu_pd(c1 + i), g1));
      const __m128d s23 = _mm_add_pd(_mm_mul_pd(_mm_loadu_pd(c2 + i), g2),
                                     _mm_mul_pd(_mm_loadu_pd(c3 + i), g3));
      _mm_storeu_pd(cj + i,
                    _mm_sub_pd(_mm_loadu_pd(cj + i), _mm_add_pd(s01, s23)));
    }
#endif
    for (; i < n; ++i) {
      cj[i] -= (c0[i] * f0 + c1[i] * f1) + (c2[i] * f2 + c3[i] * f3);
    }
  }
  for (; k < k_end; ++k) {
    const double* __restrict ck = a + k * stride;
    const double f = ck[j];
    int i = j;
#ifdef __SSE2__
    const __m128d g = _mm_set1_pd(f);
    for (; i + 2 <= n; i += 2) {
      _mm_storeu_pd(cj + i, _mm_sub_pd(_mm_loadu_pd(cj + i),
                                       _mm_mul_pd(_mm_loadu_pd(ck + i), g)));
    }
#endif
    for (; i < n; ++i) cj[i] -= ck[i] * f;
  }
}

// Finishes column j of the factor once its updates are in: the pivot (a
// pivot below `floor`, rounding on a singular Gram matrix, is raised to
// it) and the entries below it divided by it.
void CholeskyPivot(double* a, Eigen::Index stride, int n, int j,
                   double floor) {
  double* __restrict cj = a + j * stride;
  const double d = std::sqrt(std::max(cj[j], floor));
  cj[j] = d;
  const double inverse = 1.0 / d;
  int i = j + 1;
#ifdef __SSE2__
  const __m128d g = _mm_set1_pd(inverse);
  for (; i + 2 <= n; i += 2) {
    _mm_storeu_pd(cj + i, _mm_mul_pd(_mm_loadu_pd(cj + i), g));
  }
#endif
  for (; i < n; ++i) cj[i] *= inverse;
}

}  // namespace

void CholeskyInPlace(double* a, Eigen::Index stride, int n, double floor) {
  for (int j = 0; j < n; ++j) {
    CholeskyUpdate(a, stride, n, j, 0, j);
    CholeskyPivot(a, stride, n, j, floor);
  }
}

void CholeskyWithSchur(double* a, Eigen::Index stride, int n, double floor,
                       const int* start, int blocks, double* schur,
                       Eigen::Index schur_stride, int first) {
  int b = 0;
  for (int j = first; j < n; ++j) {
    while (j >= start[b + 1]) ++b;
    CholeskyUpdate(a, stride, n, j, 0, start[b]);
    if (b < blocks) {
      const double* cj = a + j * stride;
      double* sj = schur + j * schur_stride;
      for (int i = j; i < start[b + 1]; ++i) sj[i] = cj[i];
    }
    CholeskyUpdate(a, stride, n, j, start[b], j);
    CholeskyPivot(a, stride, n, j, floor);
  }
}

void CholeskySolveInPlace(const double* l, Eigen::Index stride, int n,
                          double* b, int first) {
  for (int i = first; i < n; ++i) {
    double v = b[i];
    for (int k = first; k < i; ++k) v -= l[i + k * stride] * b[k];
    b[i] = v / l[i + i * stride];
  }
  for (int i = n - 1; i >= 0; --i) {
    double v = b[i];
    for (int k = i + 1; k < n; ++k) v -= l[k + i * stride] * b[k];
    b[i] = v / l[i + i * stride];
  }
}

}  // namespace full_body_internal
}  // namespace reach
