#include "solvers/chain_kinematics.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "solvers/limits.h"

namespace reach {

ChainKinematics::ChainKinematics(const ChainProblem& problem, Workspace& ws,
                                 Pose& pose, bool position_only)
    : problem_(problem), ws_(ws), pose_(pose) {
  const int n = static_cast<int>(problem.joints.size());
  const bool orientation =
      !position_only && problem.goal->target_orientation.has_value();
  task_rows_ = orientation ? 6 : 3;
  moving_joints_ = orientation ? n : n - 1;
  inv_length_ = problem.chain_length > 1e-12 ? 1.0 / problem.chain_length : 1.0;
  for (int k = 0; k < moving_joints_; ++k) {
    dof_start_[k] = dof_;
    const Joint& joint = problem.skeleton->joint(problem.joints[k]);
    switch (joint.type) {
      case JointType::kHinge:
        ws.dof_values[dof_] =
            HingeAngle(joint, pose.local[problem.joints[k]].rotation);
        // A start pose outside the range is brought inside first.
        ws.dof_values[dof_] = ConstrainHingeAngle(joint, ws.dof_values[dof_]);
        WriteHinge(k, ws.dof_values[dof_]);
        dof_ += 1;
        break;
      case JointType::kBall:
        dof_ += 3;
        break;
      case JointType::kFixed:
        break;
    }
  }
}

void ChainKinematics::WriteHinge(int k, double angle) {
  pose_.local[problem_.joints[k]].rotation =
      HingeRotation(problem_.skeleton->joint(problem_.joints[k]), angle);
}

double ChainKinematics::Evaluate() {
  ComputeChainGlobals(problem_, pose_, ws_);
  const Transform& tip = ws_.chain_globals[problem_.joints.size() - 1];
  const Eigen::Vector3d dp = problem_.goal->target - tip.translation;
  position_error_ = dp.norm();
  error_.head<3>() = dp * inv_length_;
  if (task_rows_ == 6) {
    const Eigen::Vector3d dr = RotationVector(
        *problem_.goal->target_orientation * tip.rotation.conjugate());
    orientation_error_ = dr.norm();
    error_.tail<3>() = dr;
  } else {
    error_.tail<3>().setZero();
  }
  return error_.squaredNorm();
}

bool ChainKinematics::Converged() const {
  return position_error_ <= problem_.tolerance &&
         (task_rows_ == 3 ||
          orientation_error_ <= problem_.orientation_tolerance_rad);
}

template <int Rows>
void ChainKinematics::Jacobian(JacobianMatrix<Rows>* jacobian) const {
  jacobian->resize(Rows, dof_);
  const Eigen::Vector3d tip =
      ws_.chain_globals[problem_.joints.size() - 1].translation;
  // A rotation about unit axis a through joint position p moves the tip at
  // a x (tip - p) and turns it at a (Buss 2004, "Introduction to Inverse
  // Kinematics with Jacobian Transpose, Pseudoinverse and Damped Least
  // Squares methods", section 2).
  auto column = [&](int col, const Eigen::Vector3d& axis,
                    const Eigen::Vector3d& lever) {
    jacobian->template block<3, 1>(0, col) = axis.cross(lever) * inv_length_;
    if constexpr (Rows == 6) jacobian->template block<3, 1>(3, col) = axis;
  };
  for (int k = 0; k < moving_joints_; ++k) {
    const Joint& joint = problem_.skeleton->joint(problem_.joints[k]);
    const Transform& g = ws_.chain_globals[k];
    const Eigen::Vector3d lever = tip - g.translation;
    switch (joint.type) {
      case JointType::kHinge:
        column(dof_start_[k], RotateVector(g.rotation, joint.axis), lever);
        break;
      case JointType::kBall:
        // Three model-space axes through the joint.
        column(dof_start_[k], Eigen::Vector3d::UnitX(), lever);
        column(dof_start_[k] + 1, Eigen::Vector3d::UnitY(), lever);
        column(dof_start_[k] + 2, Eigen::Vector3d::UnitZ(), lever);
        break;
      case JointType::kFixed:
        break;
    }
  }
}

template void ChainKinematics::Jacobian<3>(JacobianMatrix<3>*) const;
template void ChainKinematics::Jacobian<6>(JacobianMatrix<6>*) const;

namespace {

// A joint within this of a bound (radians) is on it.
constexpr double kOnBound = 1e-6;

// Removes unit direction `m` (model space) from a ball joint's three
// columns: J_k <- J_k (I - m m^T).
template <int Rows>
void ProjectOut(const Eigen::Vector3d& m, int col,
                JacobianMatrix<Rows>* jacobian) {
  const Eigen::Matrix<double, Rows, 1> jm =
      jacobian->template middleCols<3>(col) * m;
  jacobian->template middleCols<3>(col).noalias() -= jm * m.transpose();
}

}  // namespace

template <int Rows>
bool ChainKinematics::BlockOutwardDirections(const DofVector& delta,
                                             JacobianMatrix<Rows>* jacobian) {
  bool changed = false;
  for (int k = 0; k < moving_joints_; ++k) {
    if (!maybe_on_bound_[k]) continue;
    const int j = problem_.joints[k];
    const Joint& joint = problem_.skeleton->joint(j);
    const int s = dof_start_[k];
    if (joint.type == JointType::kHinge) {
      const double angle = ws_.dof_values[s];
      const bool at_max = angle >= joint.max_angle_rad - kOnBound;
      const bool at_min = angle <= joint.min_angle_rad + kOnBound;
      maybe_on_bound_[k] = at_max || at_min;
      if ((delta[s] > 0.0 && at_max) || (delta[s] < 0.0 && at_min)) {
        jacobian->col(s).setZero();
        changed = true;
      }
      continue;
    }
    if (joint.type != JointType::kBall) continue;
    bool on_bound = false;
    // A model-space step w turns the joint's local rotation by
    // v = G^-1 w on the right (see Apply), where G is its model-space
    // rotation; its change along a direction n of v-space is (G n) . w.
    const Eigen::Quaterniond& g = ws_.chain_globals[k].rotation;
    const Eigen::Vector3d w = delta.template segment<3>(s);
    const Eigen::Quaterniond d =
        joint.rest.rotation.conjugate() * pose_.local[j].rotation;
    const Eigen::Vector3d& a = joint.axis;
    Eigen::Vector3d blocked[2];
    int count = 0;
    if (std::isfinite(joint.max_swing_rad)) {
      // Swing angle phi: cos(phi) = a . (D a). With D -> D exp(v),
      // d(cos phi) = v . (a x D^T a), so phi grows along (D^T a) x a.
      const Eigen::Vector3d da = RotateVector(d, a);
      const double phi = std::atan2(a.cross(da).norm(), a.dot(da));
      if (phi >= joint.max_swing_rad - kOnBound) {
        on_bound = true;
        const Eigen::Vector3d n =
            RotateVector(g, RotateVector(d.conjugate(), a).cross(a));
        if (n.dot(w) > 0.0 && n.squaredNorm() > 1e-24) {
          blocked[count++] = n.normalized();
        }
      }
    }
    if (std::isfinite(joint.min_angle_rad) ||
        std::isfinite(joint.max_angle_rad)) {
      // Twist tau = 2 atan2(A, W), A = D.vec . a, W = D.w (SwingTwist).
      // With D -> D (1, v/2): dA = v . (W a + a x D.vec) / 2 and
      // dW = -v . D.vec / 2, so tau grows along
      // W (W a + a x D.vec) + A D.vec.
      const double big_a = d.vec().dot(a), big_w = d.w();
      const double tau = TwistInRange(
          std::remainder(2.0 * std::atan2(big_a, big_w), 2.0 * M_PI),
          joint.min_angle_rad, joint.max_angle_rad);
      const bool at_max = tau >= joint.max_angle_rad - kOnBound;
      const bool at_min = tau <= joint.min_angle_rad + kOnBound;
      if (at_max || at_min) {
        on_bound = true;
        Eigen::Vector3d n = RotateVector(
            g, big_w * (big_w * a + a.cross(d.vec())) + big_a * d.vec());
        if (at_min) n = -n;
        if (n.dot(w) > 0.0 && n.squaredNorm() > 1e-24) {
          n.normalize();
          if (count == 1) {
            // Square to the swing's normal, so both stay removed.
            n -= n.dot(blocked[0]) * blocked[0];
            const double norm = n.norm();
            if (norm > 1e-9) blocked[count++] = n / norm;
          } else {
            blocked[count++] = n;
          }
        }
      }
    }
    maybe_on_bound_[k] = on_bound;
    for (int i = 0; i < count; ++i) ProjectOut<Rows>(blocked[i], s, jacobian);
    changed = changed || count > 0;
  }
  return changed;
}

template bool ChainKinematics::BlockOutwardDirections<3>(const DofVector&,
                                                         JacobianMatrix<3>*);
template bool ChainKinematics::BlockOutwardDirections<6>(const DofVector&,
                                                         JacobianMatrix<6>*);

void ChainKinematics::Apply(const DofVector& delta) {
  for (int k = 0; k < moving_joints_; ++k) {
    const int j = problem_.joints[k];
    const Joint& joint = problem_.skeleton->joint(j);
    const int s = dof_start_[k];
    switch (joint.type) {
      case JointType::kHinge: {
        double& angle = ws_.dof_values[s];
        const double moved = angle + delta[s];
        angle = ClampAngle(moved, joint.min_angle_rad, joint.max_angle_rad);
        if (angle != moved) maybe_on_bound_[k] = true;
        WriteHinge(k, angle);
        break;
      }
      case JointType::kBall: {
        // A model-space rotation w at the joint: exp(w) G = G exp(G^-1 w),
        // so the local rotation gains exp(G^-1 w) on the right.
        const Eigen::Vector3d w = delta.segment<3>(s);
        const Eigen::Vector3d local_w =
            RotateVector(ws_.chain_globals[k].rotation.conjugate(), w);
        Eigen::Quaterniond& local = pose_.local[j].rotation;
        const Eigen::Quaterniond moved = local * FromRotationVector(local_w);
        const Eigen::Quaterniond allowed = ConstrainRotation(joint, moved);
        // ConstrainRotation returns its input itself when it is inside.
        if (allowed.coeffs() != moved.coeffs()) maybe_on_bound_[k] = true;
        local = allowed.normalized();
        break;
      }
      case JointType::kFixed:
        break;
    }
  }
}

void ChainKinematics::CapStep(double max_step, DofVector* delta) const {
  double largest = 0.0;
  for (int k = 0; k < moving_joints_; ++k) {
    const int s = dof_start_[k];
    const int count = (k + 1 < moving_joints_ ? dof_start_[k + 1] : dof_) - s;
    if (count > 0) {
      largest = std::max(largest, delta->segment(s, count).norm());
    }
  }
  if (largest > max_step) *delta *= max_step / largest;
}

namespace {

// splitmix64 (Steele, Lea & Flood 2014): a tiny, allocation-free generator.
uint64_t NextRandom(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1).
double Uniform(uint64_t* state) {
  return static_cast<double>(NextRandom(state) >> 11) * 0x1.0p-53;
}

}  // namespace

uint64_t RestartSeed(const Goal& goal) {
  uint64_t seed = 0x5EEDull;
  for (int i = 0; i < 3; ++i) {
    uint64_t bits;
    std::memcpy(&bits, &goal.target[i], sizeof(bits));
    seed ^= bits;
    NextRandom(&seed);
  }
  return seed;
}

void ChainKinematics::Randomize(uint64_t* state) {
  maybe_on_bound_.fill(false);
  for (int k = 0; k < moving_joints_; ++k) {
    const int j = problem_.joints[k];
    const Joint& joint = problem_.skeleton->joint(j);
    switch (joint.type) {
      case JointType::kHinge: {
        const double lo =
            std::isfinite(joint.min_angle_rad) ? joint.min_angle_rad : -M_PI;
        const double hi =
            std::isfinite(joint.max_angle_rad) ? joint.max_angle_rad : M_PI;
        double& angle = ws_.dof_values[dof_start_[k]];
        angle = lo + (hi - lo) * Uniform(state);
        WriteHinge(k, angle);
        break;
      }
      case JointType::kBall: {
        // Uniform random rotation (Shoemake 1992).
        const double u1 = Uniform(state), u2 = Uniform(state),
                     u3 = Uniform(state);
        const double a = std::sqrt(1.0 - u1), b = std::sqrt(u1);
        const Eigen::Quaterniond q(
            a * std::sin(2 * M_PI * u2), a * std::cos(2 * M_PI * u2),
            b * std::sin(2 * M_PI * u3), b * std::cos(2 * M_PI * u3));
        pose_.local[j].rotation =
            ConstrainRotation(joint, joint.rest.rotation * q).normalized();
        break;
      }
      case JointType::kFixed:
        break;
    }
  }
}

bool ChainKinematics::TargetWithinReach() const {
  return (problem_.goal->target - ws_.chain_globals[0].translation).norm() <
         problem_.chain_length;
}

bool ChainKinematics::MoveOffBounds() {
  constexpr double kAtBound = 1e-3;
  bool moved = false;
  for (int k = 0; k < moving_joints_; ++k) {
    const Joint& joint = problem_.skeleton->joint(problem_.joints[k]);
    Eigen::Quaterniond& local = pose_.local[problem_.joints[k]].rotation;
    if (!reach::MoveOffBounds(joint, &local, kAtBound)) continue;
    moved = true;
    if (joint.type == JointType::kHinge) {
      ws_.dof_values[dof_start_[k]] = HingeAngleWithinLimits(joint, local);
      WriteHinge(k, ws_.dof_values[dof_start_[k]]);
    }
  }
  if (moved) maybe_on_bound_.fill(false);
  return moved;
}

void ChainKinematics::SaveBest() {
  for (int k = 0; k < moving_joints_; ++k) {
    ws_.best_rotations[k] = pose_.local[problem_.joints[k]].rotation;
  }
  for (int i = 0; i < dof_; ++i) ws_.best_dof_values[i] = ws_.dof_values[i];
}

void ChainKinematics::RestoreBest() {
  for (int k = 0; k < moving_joints_; ++k) {
    pose_.local[problem_.joints[k]].rotation = ws_.best_rotations[k];
  }
  for (int i = 0; i < dof_; ++i) ws_.dof_values[i] = ws_.best_dof_values[i];
}

void ChainKinematics::Save() {
  for (int k = 0; k < moving_joints_; ++k) {
    ws_.saved_rotations[k] = pose_.local[problem_.joints[k]].rotation;
  }
  for (int i = 0; i < dof_; ++i) ws_.dof_values_alt[i] = ws_.dof_values[i];
}

void ChainKinematics::Restore() {
  for (int k = 0; k < moving_joints_; ++k) {
    pose_.local[problem_.joints[k]].rotation = ws_.saved_rotations[k];
  }
  for (int i = 0; i < dof_; ++i) ws_.dof_values[i] = ws_.dof_values_alt[i];
}

}  // namespace reach
