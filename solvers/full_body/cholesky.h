// Internal to the full-body solver (solvers/full_body/problem.h): the
// Cholesky factorisation of its levels' Gram matrices, in place on blocks
// of its column-major scratch matrices (no copies, no allocation).
//
// Why not Eigen's (issue 40): each was measured in Factor and SolveLevels
// (solvers/full_body/steps.cc) in place of these, on the same blocks, with
//   taskset -c 1 scripts/bench-compare OLD NEW BM_FullBody 8
// (OLD and NEW: build/bench/solver_bench of each, Release; the ratio of
// the smallest CPU time of 8 rounds, Eigen / own, for
// BM_FullBodyHumanoid31 warm:0 / warm:1, ...Sparse warm:0 / warm:1,
// BM_FullBodyRig54 warm:0 / warm:1), and none was as fast:
// - Eigen::LLT<Eigen::Ref<MatrixXd>> in place on each level's block and
//   Eigen's triangular solves: 1.016 1.012 1.046 1.025 1.040 1.035.
// - That LLT with CholeskySolveInPlace: 1.031 1.016 1.041 1.021 1.015
//   1.006.
// - CholeskyInPlace with the triangular solves
//   (triangularView<Lower>().solveInPlace and its transpose's): 1.005
//   1.010 1.010 1.005 0.999 0.989, and again 1.007 0.995 1.029 1.017
//   1.011 1.001: slower on the whole, by up to 3%.
// - Eigen::LLT of the whole stacked Gram matrix in place of
//   CholeskyWithSchur, each level's Schur complement then formed as
//   L_bb L_bb^T (LLT does not hand it over): 0.997 1.091 1.149 1.117
//   1.143 1.101. LLT also has no floor for the pivots of a rank-deficient
//   stack (it stops), and LDLT pivots, which breaks the levels' block
//   order the projection relies on.
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
// Columns before `first` (a block's start) are taken as final: from
// `first` on the result is the whole factorisation's, operation for
// operation, when the columns before are those it would have made.
void CholeskyWithSchur(double* a, Eigen::Index stride, int n, double floor,
                       const int* start, int blocks, double* schur,
                       Eigen::Index schur_stride, int first = 0);

// Solves (L L^T) x = b in place for the factor CholeskyInPlace left at `l`.
// b's entries before `first` must be zero: the forward substitution starts
// there (the terms it leaves out are products with those zeros, which
// subtract nothing).
void CholeskySolveInPlace(const double* l, Eigen::Index stride, int n,
                          double* b, int first = 0);

}  // namespace full_body_internal
}  // namespace reach

#endif  // REACH_SOLVERS_FULL_BODY_CHOLESKY_H_
