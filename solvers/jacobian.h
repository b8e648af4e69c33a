// The Jacobian family (Buss 2004, "Introduction to Inverse Kinematics with
// Jacobian Transpose, Pseudoinverse and Damped Least Squares methods"):
//
// - JACOBIAN_TRANSPOSE: dq = alpha d along d = J^T e made conjugate to the
//   previous step's direction (nonlinear conjugate gradients,
//   Polak-Ribiere+: d = J^T e + beta d_prev, beta >= 0; back to J^T e
//   after a step that needed halving), with Buss's step length
//   alpha = <e, J d> / |J d|^2, halved while it does not lower the error.
//   Only transposes, no matrix solves, as in Buss's method, but without
//   steepest descent's zigzag down narrow valleys: about a third of the
//   iterations on the limited chains of bench/quality_bench.cc.
// - JACOBIAN_PINV: dq = J^+ e, the Moore-Penrose pseudo-inverse from the
//   singular value decomposition of J, singular values below 1e-6 of the
//   largest dropped. A step that does not lower the error is halved; after
//   four halvings the step switches to the transpose direction (near
//   singularities the pseudo-inverse step points nowhere useful).
// - JACOBIAN_DLS: dq = J^T (J J^T + lambda^2 I)^-1 e, with lambda adapted per
//   step as in Levenberg-Marquardt (a step that lowers the error is kept and
//   lambda halves; one that does not is undone and lambda grows fourfold).
//
// Targets: position (3 rows), or position and orientation (6 rows) when the
// goal has a target orientation. Hinge angles are clamped to their range and
// ball rotations projected onto their limits after every step, so results
// always respect the limits. A joint on a limit that a step would push
// further out loses that direction from its Jacobian columns, and the step
// is computed again (the clamping loop of Baerlocher & Boulic 2004, for
// hinge ranges, swing cones and twist ranges; ChainKinematics::
// BlockOutwardDirections), so the other joints take up the motion instead
// of the projection discarding it. Each step's largest joint rotation is
// capped at options.max_step_rad (default 0.5 rad).
#ifndef REACH_SOLVERS_JACOBIAN_H_
#define REACH_SOLVERS_JACOBIAN_H_

#include "solvers/chain_solver.h"

namespace reach {

enum class JacobianMethod { kTranspose, kPseudoInverse, kDampedLeastSquares };

class JacobianSolver final : public ChainSolver {
 public:
  explicit JacobianSolver(JacobianMethod method) : method_(method) {}
  int Solve(const ChainProblem& problem, Workspace& ws,
            Pose& pose) const override;

 private:
  JacobianMethod method_;
};

// The finishing pass of FABRIK and CCD: up to `max_iterations` damped
// least squares steps (as JACOBIAN_DLS, from a small damping) on the tip's
// position, from the pose as it stands and within the joint limits. Where
// those methods converge linearly with a rate near 1 (a chain near full
// extension, joints against their limits), these steps converge in a
// few. Expects ws.chain_globals current for `pose`, leaves them current;
// returns the iterations run (0 when max_iterations <= 0).
int RefineTipPosition(const ChainProblem& problem, Workspace& ws, Pose& pose,
                      int max_iterations);

// After the finishing pass: when the tip still misses a target within
// reach and a joint is held at a bound of its limits (a knee straight at
// its 0-degree bound, where FABRIK's and CCD's own passes and the steps
// above all stall), those joints move into the middle of their ranges
// (ChainKinematics::MoveOffBounds) and up to `max_iterations` damped least
// squares steps run from there; the nearer of the two answers stands.
// Same expectations and result as RefineTipPosition.
int RefineOffBounds(const ChainProblem& problem, Workspace& ws, Pose& pose,
                    int max_iterations);

}  // namespace reach

#endif  // REACH_SOLVERS_JACOBIAN_H_
