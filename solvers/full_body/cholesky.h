// Internal to the full-body solver (solvers/full_body/problem.h): the
// Cholesky factorisation of its levels' Gram matrices, in place on blocks
// of its column-major scratch matrices (no copies, no allocation).
#ifndef REACH_SOLVERS_FULL_BODY_CHOLESKY_H_
#define REACH_SOLVERS_FULL_BODY_CHOLESKY_H_

#include <Eigen/Core>

namespace reach {
namespace full_body_internal {

// In-place Cholesky of the n x n block at `a` (column-major, columns
// `stride` apart; lower triangle read and written): a = L L^T.
// Left-looking: each column takes the updates of the final columns before
// it down its contiguous entries.
void CholeskyInPlace(double* a, Eigen::Index stride, int n, double floor);

// CholeskyInPlace of the block at `a`, whose rows and columns form
// consecutive blocks (block b: from start[b] to start[b + 1]); for the
// first `blocks` of them, also the Schur complement of each block after
// the blocks before it, written to the lower triangle of the same block
// of `schur`: S_b = A_bb - L_b,<b L_b,<b^T = L_bb L_bb^T (a column of the
// factor holds it once the earlier blocks' updates are in; but for pivots
// raised to `floor`, where L_bb L_bb^T would carry the raise).
void CholeskyWithSchur(double* a, Eigen::Index stride, int n, double floor,
                       const int* start, int blocks, double* schur,
                       Eigen::Index schur_stride);

// Solves (L L^T) x = b in place for the factor CholeskyInPlace left at `l`.
void CholeskySolveInPlace(const double* l, Eigen::Index stride, int n,
                          double* b);

}  // namespace full_body_internal
}  // namespace reach

#endif  // REACH_SOLVERS_FULL_BODY_CHOLESKY_H_
