// Joint-space view of a chain shared by the Jacobian family and gradient
// descent: the chain's degrees of freedom, the task-space error, the
// Jacobian, and applying a step within the joint limits.
//
// Units: positions are divided by the chain's length, so position and
// orientation errors are both dimensionless and the same damping works for
// a finger and a crane. Rotational DOFs are radians.
#ifndef REACH_SOLVERS_CHAIN_KINEMATICS_H_
#define REACH_SOLVERS_CHAIN_KINEMATICS_H_

#include <Eigen/Core>
#include <array>

#include "solvers/chain_solver.h"

namespace reach {

using TaskVector = Eigen::Matrix<double, 6, 1>;
template <int Rows>
using JacobianMatrix =
    Eigen::Matrix<double, Rows, Eigen::Dynamic, 0, Rows, kMaxChainDof>;
using DofVector = Eigen::Matrix<double, Eigen::Dynamic, 1, 0, kMaxChainDof, 1>;

class ChainKinematics {
 public:
  // Lays out the DOFs (hinge 1, ball 3, fixed 0) of the joints that move the
  // tip: all but the tip for a position goal, all for a 6-D goal.
  ChainKinematics(const ChainProblem& problem, Workspace& ws, Pose& pose);

  int dof() const { return dof_; }
  // 6 with a target orientation, else 3.
  int task_rows() const { return task_rows_; }

  // Forward kinematics of the chain and the error towards the goal. Returns
  // the squared norm of the (dimensionless) task error.
  double Evaluate();
  const TaskVector& error() const { return error_; }
  double position_error() const { return position_error_; }
  double orientation_error() const { return orientation_error_; }
  bool Converged() const;

  // Jacobian of the tip (position / chain length, then rotation) with
  // respect to the DOFs, at the last Evaluate().
  template <int Rows>
  void Jacobian(JacobianMatrix<Rows>* jacobian) const;

  // Adds `delta` to the DOFs: hinge angles are clamped to their range, ball
  // rotations (delta is a model-space rotation vector) projected onto their
  // limits. Call Evaluate() afterwards.
  void Apply(const DofVector& delta);

  // Scales `delta` down uniformly so no joint turns more than `max_step`
  // radians (a ball joint's turn is the norm of its rotation vector).
  void CapStep(double max_step, DofVector* delta) const;

  // Saves / restores the chain's DOFs (for rejected steps).
  void Save();
  void Restore();

 private:
  void WriteHinge(int k, double angle);

  const ChainProblem& problem_;
  Workspace& ws_;
  Pose& pose_;
  int moving_joints_ = 0;  // Chain joints that carry DOFs (prefix).
  int dof_ = 0;
  int task_rows_ = 3;
  double inv_length_ = 1.0;
  std::array<int, kMaxChainJoints> dof_start_{};
  TaskVector error_ = TaskVector::Zero();
  double position_error_ = 0.0;
  double orientation_error_ = 0.0;
};

}  // namespace reach

#endif  // REACH_SOLVERS_CHAIN_KINEMATICS_H_
