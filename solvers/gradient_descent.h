// GRADIENT_DESCENT: projected gradient descent on the task error
// f(q) = |e(q)|^2 / 2 (positions in chain lengths, orientations in radians).
//
// The descent direction is -grad f = J^T e. Step lengths follow Barzilai &
// Borwein (1988, "Two-point step size gradient methods"), starting from
// Buss's Jacobian-transpose step, with Armijo backtracking so every accepted
// step lowers f. Joint limits are enforced by projection after each step.
// Slower to converge than the Jacobian pseudo-inverse or DLS; it is here for
// cost functions those cannot express and as a reference.
#ifndef REACH_SOLVERS_GRADIENT_DESCENT_H_
#define REACH_SOLVERS_GRADIENT_DESCENT_H_

#include "solvers/chain_solver.h"

namespace reach {

class GradientDescentSolver final : public ChainSolver {
 public:
  int Solve(const ChainProblem& problem, Workspace& ws,
            Pose& pose) const override;
};

}  // namespace reach

#endif  // REACH_SOLVERS_GRADIENT_DESCENT_H_
