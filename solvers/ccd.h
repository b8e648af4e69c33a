// CCD: cyclic coordinate descent (Wang & Chen 1991; Kenwright 2012,
// "Inverse Kinematics - Cyclic Coordinate Descent").
//
// Each iteration visits the chain's joints from the tip's parent to the
// root and turns each so the tip swings towards the target: a ball joint by
// the smallest rotation, a hinge about its axis by the angle between the
// tip and target directions projected across it. Every turn is capped by
// options.max_step_rad (per-step damping; 0 = no cap) and projected onto the
// joint's limits, so the result always respects them.
#ifndef REACH_SOLVERS_CCD_H_
#define REACH_SOLVERS_CCD_H_

#include "solvers/chain_solver.h"

namespace reach {

class CcdSolver final : public ChainSolver {
 public:
  int Solve(const ChainProblem& problem, Workspace& ws,
            Pose& pose) const override;
};

}  // namespace reach

#endif  // REACH_SOLVERS_CCD_H_
