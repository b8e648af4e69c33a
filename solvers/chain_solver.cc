#include "solvers/chain_solver.h"

#include "solvers/ccd.h"
#include "solvers/fabrik.h"
#include "solvers/gradient_descent.h"
#include "solvers/jacobian.h"
#include "solvers/limits.h"
#include "solvers/two_bone.h"

namespace reach {

void Workspace::Reserve(int num_joints) {
  if (static_cast<int>(globals.size()) < num_joints) globals.resize(num_joints);
  if (static_cast<int>(path.capacity()) < num_joints) path.reserve(num_joints);
  if (static_cast<int>(ancestors.capacity()) < num_joints) {
    ancestors.reserve(num_joints);
  }
  if (static_cast<int>(computed_at.size()) < num_joints) {
    computed_at.resize(num_joints);
    moved_at.resize(num_joints);
  }
}

const ChainSolver& GetSolver(SolverKind kind) {
  static const TwoBoneSolver two_bone;
  static const FabrikSolver fabrik;
  static const CcdSolver ccd;
  static const JacobianSolver transpose(JacobianMethod::kTranspose);
  static const JacobianSolver pinv(JacobianMethod::kPseudoInverse);
  static const JacobianSolver dls(JacobianMethod::kDampedLeastSquares);
  static const GradientDescentSolver gradient_descent;
  switch (kind) {
    case SolverKind::kTwoBone:
      return two_bone;
    case SolverKind::kFabrik:
      return fabrik;
    case SolverKind::kCcd:
      return ccd;
    case SolverKind::kJacobianTranspose:
      return transpose;
    case SolverKind::kJacobianPinv:
      return pinv;
    case SolverKind::kJacobianDls:
      return dls;
    case SolverKind::kGradientDescent:
      return gradient_descent;
    case SolverKind::kAuto:
    case SolverKind::kFullBody:
      break;  // Resolved / solved by the caller; never dispatched.
  }
  return dls;
}

void ComputeChainGlobals(const ChainProblem& problem, const Pose& pose,
                         Workspace& ws) {
  const Transform* parent = &problem.parent_global;
  for (size_t k = 0; k < problem.joints.size(); ++k) {
    ws.chain_globals[k] = *parent * pose.local[problem.joints[k]];
    parent = &ws.chain_globals[k];
  }
}

Eigen::Quaterniond SetGlobalRotation(const ChainProblem& problem, int k,
                                     const Eigen::Quaterniond& parent_rotation,
                                     const Eigen::Quaterniond& global_rotation,
                                     Pose& pose) {
  const int j = problem.joints[k];
  const Eigen::Quaterniond local =
      ConstrainRotation(problem.skeleton->joint(j),
                        parent_rotation.conjugate() * global_rotation);
  // Normalised: iterative solvers apply hundreds of these per solve, and
  // rounding would otherwise compound into visible scale (1e-7 seen in CCD).
  pose.local[j].rotation = local.normalized();
  return parent_rotation * pose.local[j].rotation;
}

Eigen::Quaterniond TurnTowards(const Joint& joint,
                               const Transform& joint_global,
                               const Eigen::Vector3d& from,
                               const Eigen::Vector3d& to) {
  const Eigen::Vector3d& pivot = joint_global.translation;
  const Eigen::Vector3d to_from = from - pivot;
  const Eigen::Vector3d to_to = to - pivot;
  switch (joint.type) {
    case JointType::kBall:
      return SmallestRotation(to_from, to_to);
    case JointType::kHinge: {
      const Eigen::Vector3d axis = RotateVector(joint_global.rotation, joint.axis);
      const Eigen::Vector3d a = to_from - to_from.dot(axis) * axis;
      const Eigen::Vector3d b = to_to - to_to.dot(axis) * axis;
      if (a.squaredNorm() < 1e-24 || b.squaredNorm() < 1e-24 ||
          !a.allFinite() || !b.allFinite()) {
        return Eigen::Quaterniond::Identity();
      }
      // Scaled to a largest component of 1 first: the angle is the same,
      // and far points (|a| |b| > ~1e308) would overflow the products.
      const Eigen::Vector3d a1 = a / a.cwiseAbs().maxCoeff();
      const Eigen::Vector3d b1 = b / b.cwiseAbs().maxCoeff();
      return AxisAngle(axis, std::atan2(axis.dot(a1.cross(b1)), a1.dot(b1)));
    }
    case JointType::kFixed:
      break;
  }
  return Eigen::Quaterniond::Identity();
}

void ApplyTipOrientation(const ChainProblem& problem, Workspace& ws,
                         Pose& pose) {
  if (!problem.goal->target_orientation) return;
  const int last = static_cast<int>(problem.joints.size()) - 1;
  const Transform& parent = ws.chain_globals[last - 1];
  const Eigen::Quaterniond applied = SetGlobalRotation(
      problem, last, parent.rotation, *problem.goal->target_orientation, pose);
  ws.chain_globals[last].rotation = applied;
}

}  // namespace reach
