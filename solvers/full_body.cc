#include "solvers/full_body.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "solvers/bend_plane.h"
#include "solvers/limits.h"
#include "solvers/solve.h"

namespace reach {
namespace {

using Eigen::Quaterniond;
using Eigen::Vector3d;

constexpr int kDefaultIterations = 64;
// Damping of every level's least-squares step (rows in body sizes and
// radians, so dimensionless): small enough that a well-conditioned level
// converges by ~1e-3 per iteration, large enough that a singular one
// (straight knees, out-of-reach targets) takes bounded steps.
constexpr double kDamping = 0.03;
// Regularises the Gram matrix of the levels above when projecting a level
// into their null space (rank-deficient stacks: a foot's position and
// orientation at a locked ankle).
constexpr double kProjectionRegulariser = 1e-9;
// Largest rotation of one joint, and translation of the root (in body
// sizes), in one iteration: the step is scaled down as a whole to fit.
constexpr double kMaxJointStep = 0.35;
constexpr double kMaxRootStep = 0.2;
// A joint projected back onto its limits by more than this (radians) is
// held at the limit for the rest of the iteration's step.
constexpr double kClampedBy = 1e-7;

bool IsFullBody(const Goal& goal) {
  return goal.solver == SolverKind::kFullBody;
}

int EffectorOf(const Skeleton& skeleton, const Goal& goal) {
  return goal.chain >= 0 ? skeleton.chain(goal.chain).joints.back()
                         : goal.tip_joint;
}

// The first joint of the limb a goal's pole turns: the chain's root, or
// root_joint, or the effector's grandparent (-1 when it has none).
int LimbRootOf(const Skeleton& skeleton, const Goal& goal) {
  if (goal.chain >= 0) return skeleton.chain(goal.chain).joints.front();
  if (goal.root_joint >= 0) return goal.root_joint;
  const int parent = skeleton.joint(goal.tip_joint).parent;
  return parent < 0 ? -1 : skeleton.joint(parent).parent;
}

int TopRoot(const Skeleton& skeleton, int j) {
  while (skeleton.joint(j).parent >= 0) j = skeleton.joint(j).parent;
  return j;
}

bool IsAncestorOrSelf(const Skeleton& skeleton, int ancestor, int j) {
  for (; j >= 0; j = skeleton.joint(j).parent) {
    if (j == ancestor) return true;
  }
  return false;
}

std::string Field(int i, absl::string_view field) {
  return absl::StrCat("goals[", i, "].", field);
}

int ResolveRoot(const Skeleton& skeleton, absl::Span<const Goal> goals,
                const FullBodyOptions& options) {
  if (options.root_joint >= 0) return options.root_joint;
  for (const Goal& goal : goals) {
    if (IsFullBody(goal)) return TopRoot(skeleton, EffectorOf(skeleton, goal));
  }
  return -1;
}

// Rows a goal adds: position 3, orientation 3, look-at 2.
int RowsOf(const Goal& goal) {
  if (goal.aim_axis) return 2;
  return 3 + (goal.target_orientation ? 3 : 0);
}

// Orders goals by content, so the problem does not depend on the order
// they came in: priority, effector, kind, then every number.
auto SortKey(const Skeleton& skeleton, const Goal& g) {
  const Quaterniond q =
      g.target_orientation.value_or(Quaterniond(0, 0, 0, 0));
  const Vector3d aim = g.aim_axis.value_or(Vector3d::Zero());
  const Vector3d pole = g.pole.value_or(Vector3d::Zero());
  return std::make_tuple(
      g.priority, EffectorOf(skeleton, g), g.aim_axis.has_value(),
      g.target_orientation.has_value(), g.pole.has_value(), g.target.x(),
      g.target.y(), g.target.z(), q.w(), q.x(), q.y(), q.z(), aim.x(),
      aim.y(), aim.z(), pole.x(), pole.y(), pole.z(), g.weight,
      g.options.tolerance, g.options.orientation_tolerance_rad,
      LimbRootOf(skeleton, g));
}

// Rotation vector (axis times angle, angle in [0, pi]) of the unit
// quaternion q.
Vector3d RotationVector(Quaterniond q) {
  if (q.w() < 0.0) q.coeffs() = -q.coeffs();
  const double s = q.vec().norm();
  if (s < 1e-300) return 2.0 * q.vec();
  return (2.0 * std::atan2(s, q.w()) / s) * q.vec();
}

}  // namespace

double BodySize(const Skeleton& skeleton) {
  Vector3d lo = Vector3d::Constant(kInf), hi = Vector3d::Constant(-kInf);
  for (const Transform& t : skeleton.rest_globals()) {
    lo = lo.cwiseMin(t.translation);
    hi = hi.cwiseMax(t.translation);
  }
  const double size = (hi - lo).maxCoeff();
  return std::isfinite(size) ? std::max(size, 1e-9) : 1e-9;
}

double AimError(const Transform& effector, const Vector3d& aim_axis,
                const Vector3d& target) {
  const Vector3d to = target - effector.translation;
  const Vector3d aim = RotateVector(effector.rotation, aim_axis);
  if (!(to.norm() > 0.0) || !(aim.norm() > 0.0)) return 0.0;
  return std::atan2(aim.cross(to).norm(), aim.dot(to));
}

absl::Status ValidateFullBody(const Skeleton& skeleton,
                              absl::Span<const Goal> goals,
                              const FullBodyOptions& options,
                              int max_iterations) {
  const int n = skeleton.num_joints();
  if (options.root_joint < -1 || options.root_joint >= n) {
    return absl::NotFoundError(absl::StrCat(
        "full_body.root_joint = ", options.root_joint,
        ": the skeleton has joints 0..", n - 1, " (-1: the skeleton root)"));
  }
  const int mode = static_cast<int>(options.root_mode);
  if (mode < 0 || mode > 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "full_body.root_mode = ", mode, " is not a known root mode"));
  }
  if (auto s = ValidateRange(options.root_translation_stiffness,
                             {"full_body", 0, "root_translation_stiffness"},
                             0.0, 1.0);
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("full_body.root_translation_stiffness = ",
                     options.root_translation_stiffness,
                     " is outside [0, 1]"));
  }
  if (options.max_iterations < 0 || options.max_iterations > max_iterations) {
    return absl::InvalidArgumentError(
        absl::StrCat("full_body.max_iterations = ", options.max_iterations,
                     " is outside [0, ", max_iterations, "]"));
  }
  if (!(options.time_budget_ms >= 0.0 && options.time_budget_ms <= 60000.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("full_body.time_budget_ms = ", options.time_budget_ms,
                     " is outside [0, 60000]"));
  }
  const int root = ResolveRoot(skeleton, goals, options);
  for (int i = 0; i < static_cast<int>(goals.size()); ++i) {
    const Goal& goal = goals[i];
    if (!IsFullBody(goal)) {
      if (goal.aim_axis) {
        return absl::InvalidArgumentError(
            absl::StrCat(Field(i, "aim_axis"),
                         " applies to SOLVER_FULL_BODY only; this goal's "
                         "solver is ",
                         SolverName(goal.solver)));
      }
      if (goal.priority != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            Field(i, "priority"), " = ", goal.priority,
            " applies to SOLVER_FULL_BODY only; this goal's solver is ",
            SolverName(goal.solver)));
      }
      continue;
    }
    // The effector (and the limb a pole turns).
    if (goal.chain >= skeleton.num_chains() || goal.chain < -1) {
      return absl::NotFoundError(absl::StrCat(
          Field(i, "chain"), " = ", goal.chain, ": the skeleton has ",
          skeleton.num_chains(), " chains"));
    }
    if (goal.chain < 0) {
      if (goal.tip_joint < 0 || goal.tip_joint >= n) {
        return absl::NotFoundError(
            absl::StrCat(Field(i, "tip_joint"), " = ", goal.tip_joint,
                         ": a full-body goal names its effector joint (the "
                         "skeleton has joints 0..",
                         n - 1, ") or a chain"));
      }
      if (goal.root_joint >= n || goal.root_joint < -1 ||
          (goal.root_joint >= 0 &&
           PathLength(skeleton, goal.root_joint, goal.tip_joint) < 0)) {
        return absl::InvalidArgumentError(absl::StrCat(
            Field(i, "root_joint"), " = ", goal.root_joint,
            " is not a proper ancestor of tip_joint ", goal.tip_joint,
            " (a full-body goal's root_joint only names the limb its pole "
            "turns; -1 for the effector's grandparent)"));
      }
    }
    const int effector = EffectorOf(skeleton, goal);
    if (root >= 0 && !IsAncestorOrSelf(skeleton, root, effector)) {
      return absl::InvalidArgumentError(absl::StrCat(
          Field(i, goal.chain >= 0 ? "chain" : "tip_joint"), ": effector \"",
          skeleton.joint(effector).name, "\" is not below the solver root \"",
          skeleton.joint(root).name, "\" (full_body.root_joint)"));
    }
    if (goal.aim_axis) {
      if (auto s = ValidateFinite(*goal.aim_axis, {"goals", i, "aim_axis"});
          !s.ok()) {
        return s;
      }
      if (!(goal.aim_axis->norm() >= 1e-9)) {
        return absl::InvalidArgumentError(absl::StrCat(
            Field(i, "aim_axis"), " is zero; a look-at needs an axis"));
      }
      if (goal.target_orientation) {
        return absl::InvalidArgumentError(absl::StrCat(
            Field(i, "target_orientation"),
            ": a look-at goal (aim_axis) takes no target orientation"));
      }
    }
    if (goal.priority < 0 || goal.priority > kMaxPriority) {
      return absl::InvalidArgumentError(
          absl::StrCat(Field(i, "priority"), " = ", goal.priority,
                       " is outside [0, ", kMaxPriority, "]"));
    }
    const SolveOptions& o = goal.options;
    for (auto [value, name] :
         {std::pair{o.damping, "options.damping"},
          std::pair{o.max_step_rad, "options.max_step_rad"},
          std::pair{static_cast<double>(o.max_restarts),
                    "options.max_restarts"},
          std::pair{o.max_stretch, "options.max_stretch"},
          std::pair{o.soft, "options.soft"},
          std::pair{static_cast<double>(o.max_iterations),
                    "options.max_iterations"},
          std::pair{o.time_budget_ms, "options.time_budget_ms"}}) {
      if (value != 0.0) {
        return absl::InvalidArgumentError(absl::StrCat(
            Field(i, name), " = ", value,
            " does not apply to SOLVER_FULL_BODY (its iteration cap and "
            "time budget are full_body.max_iterations and "
            "full_body.time_budget_ms)"));
      }
    }
    if (goal.pole) {
      const int limb_root = LimbRootOf(skeleton, goal);
      if (limb_root < 0 || PathLength(skeleton, limb_root, effector) < 3) {
        return absl::InvalidArgumentError(absl::StrCat(
            Field(i, "pole"), ": the limb whose bend faces the pole needs "
                              "three joints or more, and effector \"",
            skeleton.joint(effector).name, "\" has no grandparent"));
      }
      if (skeleton.joint(limb_root).type != JointType::kBall) {
        return absl::InvalidArgumentError(absl::StrCat(
            Field(i, "pole"), ": the limb turns about its root to face the "
                              "pole, and its root joint \"",
            skeleton.joint(limb_root).name, "\" is not a ball joint"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace reach

namespace reach {
namespace {

// A matrix block or vector segment the in-place Cholesky works on.
using MatrixRef = Eigen::Ref<Eigen::MatrixXd>;

// Grows `m` to at least rows x cols (never shrinks, so a warmed-up scratch
// does not reallocate).
void Reserve(Eigen::MatrixXd& m, int rows, int cols) {
  if (m.rows() < rows || m.cols() < cols) {
    m.resize(std::max<Eigen::Index>(m.rows(), rows),
             std::max<Eigen::Index>(m.cols(), cols));
  }
}
void Reserve(Eigen::VectorXd& v, int size) {
  if (v.size() < size) v.resize(size);
}

// exp of a rotation vector.
Quaterniond Exp(const Vector3d& v) {
  const double angle = v.norm();
  if (!(angle > 1e-300)) return Quaterniond::Identity();
  return AxisAngle(v / angle, angle);
}

// The solve of one request's full-body goals.
class FullBodySolve {
 public:
  FullBodySolve(const Skeleton& skeleton, absl::Span<const Goal> goals,
                const FullBodyOptions& options, FullBodyScratch& s, Pose* pose)
      : skeleton_(skeleton),
        goals_(goals),
        options_(options),
        s_(s),
        pose_(*pose),
        body_(BodySize(skeleton)) {}

  // Sets up the problem; false when there is nothing to solve.
  bool Setup(absl::Span<GoalResult> results);
  int Run(const Deadline& deadline, int max_iterations);

 private:
  void ForwardKinematics();
  // Fills the Jacobian and error rows; returns whether every goal is
  // reached, and writes each level's excess into level_excess_.
  bool Evaluate();
  // The prioritised step (in s_.step, model units / radians).
  void ComputeStep();
  // Applies s_.step to the pose, projecting onto limits; returns whether a
  // joint that has columns was clamped (and flags it in s_.locked).
  bool ApplyStep();
  void ApplyPoles();
  void SaveLocals(std::vector<Transform>& to) const;
  void RestoreLocals(const std::vector<Transform>& from);
  bool Better(const std::array<double, kMaxPriority + 1>& a,
              const std::array<double, kMaxPriority + 1>& b) const;

  const Skeleton& skeleton_;
  absl::Span<const Goal> goals_;
  const FullBodyOptions& options_;
  FullBodyScratch& s_;
  Pose& pose_;
  const double body_;
  int root_ = -1;
  Transform root_parent_;
  bool translates_ = false;
  int rows_ = 0;
  int cols_ = 0;
  int num_levels_ = 0;
  std::array<int, kMaxPriority + 2> level_start_{};  // Rows.
  std::array<double, kMaxPriority + 1> level_excess_{};
  bool has_poles_ = false;
};

bool FullBodySolve::Setup(absl::Span<GoalResult> results) {
  const int n = skeleton_.num_joints();
  root_ = ResolveRoot(skeleton_, goals_, options_);
  s_.goal_order.clear();
  for (int i = 0; i < static_cast<int>(goals_.size()); ++i) {
    const Goal& goal = goals_[i];
    if (!IsFullBody(goal)) continue;
    GoalResult& r = results[i];
    r = GoalResult();
    r.solver = SolverKind::kFullBody;
    r.tolerance =
        goal.options.tolerance > 0.0 ? goal.options.tolerance : 1e-5 * body_;
    r.orientation_tolerance_rad = goal.options.orientation_tolerance_rad > 0.0
                                      ? goal.options.orientation_tolerance_rad
                                      : 1e-4;
    if (goal.weight > 0.0) s_.goal_order.push_back(i);
  }
  if (s_.goal_order.empty() || root_ < 0) return false;
  std::sort(s_.goal_order.begin(), s_.goal_order.end(), [&](int a, int b) {
    const auto ka = SortKey(skeleton_, goals_[a]);
    const auto kb = SortKey(skeleton_, goals_[b]);
    if (ka != kb) return ka < kb;
    return a < b;
  });
  const int m = static_cast<int>(s_.goal_order.size());
  s_.effector.resize(m);
  s_.tolerance.resize(m);
  s_.orientation_tolerance.resize(m);

  // Joints on a root-effector path (active), and those whose rotation moves
  // an effector (a strict ancestor of one, or the effector of an
  // orientation or look-at goal): these get columns.
  s_.active.assign(n, 0);
  s_.drives.assign(n, 0);
  has_poles_ = false;
  rows_ = 0;
  num_levels_ = 0;
  int last_priority = -1;
  for (int k = 0; k < m; ++k) {
    const Goal& goal = goals_[s_.goal_order[k]];
    const int e = EffectorOf(skeleton_, goal);
    s_.effector[k] = e;
    s_.tolerance[k] = results[s_.goal_order[k]].tolerance;
    s_.orientation_tolerance[k] =
        results[s_.goal_order[k]].orientation_tolerance_rad;
    if (goal.target_orientation || goal.aim_axis) s_.drives[e] = 1;
    for (int j = e;; j = skeleton_.joint(j).parent) {
      s_.active[j] = 1;
      if (j != e) s_.drives[j] = 1;
      if (j == root_) break;
    }
    if (goal.pole) has_poles_ = true;
    if (goal.priority != last_priority) {
      level_start_[num_levels_++] = rows_;
      last_priority = goal.priority;
    }
    rows_ += RowsOf(goal);
  }
  level_start_[num_levels_] = rows_;

  // Columns: the root's translation first, then each driving joint's.
  const bool pinned = options_.root_mode == RootMode::kPinned;
  translates_ = !pinned && skeleton_.joint(root_).parent < 0 &&
                options_.root_translation_stiffness < 1.0;
  s_.active_joints.clear();
  s_.dof_start.assign(n, -1);
  s_.dof_joint.clear();
  s_.dof_weight.clear();
  if (translates_) {
    for (int a = 0; a < 3; ++a) {
      s_.dof_joint.push_back(-1);
      s_.dof_weight.push_back(
          std::sqrt(1.0 - options_.root_translation_stiffness));
    }
  }
  for (int j = root_; j < n; ++j) {
    if (!s_.active[j]) continue;
    s_.active_joints.push_back(j);
    const Joint& joint = skeleton_.joint(j);
    if (!s_.drives[j] || joint.stiffness >= 1.0 ||
        joint.type == JointType::kFixed || (j == root_ && pinned)) {
      continue;
    }
    s_.dof_start[j] = static_cast<int>(s_.dof_joint.size());
    const int count = joint.type == JointType::kBall ? 3 : 1;
    for (int a = 0; a < count; ++a) {
      s_.dof_joint.push_back(j);
      s_.dof_weight.push_back(std::sqrt(1.0 - joint.stiffness));
    }
  }
  cols_ = static_cast<int>(s_.dof_joint.size());
  s_.locked.assign(cols_, 0);
  s_.globals.resize(n);

  // The root's parent frame (fixed during the solve).
  root_parent_ = Transform();
  s_.ancestors.clear();
  for (int a = skeleton_.joint(root_).parent; a >= 0;
       a = skeleton_.joint(a).parent) {
    s_.ancestors.push_back(a);
  }
  for (int i = static_cast<int>(s_.ancestors.size()) - 1; i >= 0; --i) {
    root_parent_ = root_parent_ * pose_.local[s_.ancestors[i]];
  }

  Reserve(s_.jacobian, rows_, cols_);
  Reserve(s_.gram, rows_, rows_);
  Reserve(s_.cross, rows_, rows_);
  Reserve(s_.small, rows_, rows_);
  Reserve(s_.error, rows_);
  Reserve(s_.coeffs, rows_);
  Reserve(s_.rhs, rows_);
  Reserve(s_.step, cols_);
  s_.best_locals.resize(n);
  s_.saved_locals.resize(n);
  return true;
}

void FullBodySolve::ForwardKinematics() {
  for (int j : s_.active_joints) {
    s_.globals[j] = (j == root_ ? root_parent_
                                : s_.globals[skeleton_.joint(j).parent]) *
                    pose_.local[j];
  }
}

bool FullBodySolve::Evaluate() {
  Eigen::MatrixXd& J = s_.jacobian;
  J.topLeftCorner(rows_, cols_).setZero();
  level_excess_.fill(0.0);
  bool all_reached = true;
  int row = 0;
  int level = 0;
  const int m = static_cast<int>(s_.goal_order.size());
  for (int k = 0; k < m; ++k) {
    while (row >= level_start_[level + 1]) ++level;
    const Goal& goal = goals_[s_.goal_order[k]];
    const int e = s_.effector[k];
    const Transform& ge = s_.globals[e];
    const double sw = std::sqrt(goal.weight);
    double excess = 0.0;
    if (goal.aim_axis) {
      // Look-at: two rows, the aim's turn across itself.
      const Vector3d aim =
          RotateVector(ge.rotation, goal.aim_axis->normalized());
      const Vector3d b1 = aim.unitOrthogonal();
      const Vector3d b2 = aim.cross(b1);
      const Vector3d to = goal.target - ge.translation;
      Vector3d turn = Vector3d::Zero();
      double angle = 0.0;
      if (to.norm() > 0.0) {
        const Vector3d d = to.normalized();
        const Vector3d c = aim.cross(d);
        angle = std::atan2(c.norm(), aim.dot(d));
        turn = c.norm() > 1e-300 ? (angle / c.norm()) * c : angle * b1;
      }
      s_.error(row) = sw * b1.dot(turn);
      s_.error(row + 1) = sw * b2.dot(turn);
      excess = std::max(0.0, angle - s_.orientation_tolerance[k]);
      for (int j = e;; j = skeleton_.joint(j).parent) {
        const int c0 = s_.dof_start[j];
        if (c0 >= 0) {
          const Joint& joint = skeleton_.joint(j);
          if (joint.type == JointType::kBall) {
            for (int a = 0; a < 3; ++a) {
              J(row, c0 + a) = sw * b1(a);
              J(row + 1, c0 + a) = sw * b2(a);
            }
          } else {
            const Vector3d u =
                RotateVector(s_.globals[j].rotation, joint.axis);
            J(row, c0) = sw * b1.dot(u);
            J(row + 1, c0) = sw * b2.dot(u);
          }
        }
        if (j == root_) break;
      }
      row += 2;
    } else {
      const Vector3d miss = goal.target - ge.translation;
      s_.error.segment<3>(row) = (sw / body_) * miss;
      excess = std::max(0.0, miss.norm() - s_.tolerance[k]) / body_;
      const bool orient = goal.target_orientation.has_value();
      Vector3d turn = Vector3d::Zero();
      if (orient) {
        turn = RotationVector(goal.target_orientation->normalized() *
                              ge.rotation.conjugate());
        s_.error.segment<3>(row + 3) = sw * turn;
        excess += std::max(0.0, turn.norm() - s_.orientation_tolerance[k]);
      }
      if (translates_) {
        for (int a = 0; a < 3; ++a) J(row + a, a) = sw;
      }
      for (int j = e;; j = skeleton_.joint(j).parent) {
        const int c0 = s_.dof_start[j];
        if (c0 >= 0) {
          const Joint& joint = skeleton_.joint(j);
          const Vector3d v =
              (ge.translation - s_.globals[j].translation) / body_;
          if (joint.type == JointType::kBall) {
            // u x v for u = X, Y, Z.
            J(row + 0, c0 + 1) = sw * v.z();
            J(row + 0, c0 + 2) = -sw * v.y();
            J(row + 1, c0 + 0) = -sw * v.z();
            J(row + 1, c0 + 2) = sw * v.x();
            J(row + 2, c0 + 0) = sw * v.y();
            J(row + 2, c0 + 1) = -sw * v.x();
            if (orient) {
              for (int a = 0; a < 3; ++a) J(row + 3 + a, c0 + a) = sw;
            }
          } else {
            const Vector3d u =
                RotateVector(s_.globals[j].rotation, joint.axis);
            J.block<3, 1>(row, c0) = sw * u.cross(v);
            if (orient) J.block<3, 1>(row + 3, c0) = sw * u;
          }
        }
        if (j == root_) break;
      }
      row += orient ? 6 : 3;
    }
    if (excess > 0.0) all_reached = false;
    level_excess_[level] += goal.weight * excess * excess;
  }
  return all_reached;
}

void FullBodySolve::ComputeStep() {
  // Columns weighted by sqrt(1 - stiffness) (0 when locked): the step
  // minimises sum(dq^2 / (1 - stiffness)).
  Eigen::MatrixXd& J = s_.jacobian;
  for (int c = 0; c < cols_; ++c) {
    J.col(c).head(rows_) *= s_.locked[c] ? 0.0 : s_.dof_weight[c];
  }
  auto G = s_.gram.topLeftCorner(rows_, rows_);
  G.triangularView<Eigen::Lower>() =
      J.topLeftCorner(rows_, cols_) * J.topLeftCorner(rows_, cols_).transpose();
  G.triangularView<Eigen::StrictlyUpper>() = G.transpose();

  // The step is J^T c: every level's step lies in the span of its rows
  // projected away from the levels above (Siciliano-Slotine), so the
  // coefficients c say it all and only Gram-sized matrices are formed.
  auto c = s_.coeffs.head(rows_);
  c.setZero();
  const double lambda2 = kDamping * kDamping;
  for (int level = 0; level < num_levels_; ++level) {
    const int s = level_start_[level];
    const int m = level_start_[level + 1] - s;
    auto r = s_.rhs.head(m);
    r = s_.error.segment(s, m) - G.middleRows(s, m) * c;
    auto H = s_.small.topLeftCorner(m, m);
    H = G.block(s, s, m, m);
    if (s > 0) {
      // X^T = M^-1 C^T with M the Gram matrix of the rows above.
      auto M = s_.cross.topLeftCorner(s, s);
      M = G.topLeftCorner(s, s);
      M.diagonal().array() += kProjectionRegulariser;
      Eigen::LLT<MatrixRef> above(M);
      auto Xt = s_.cross.block(0, s, s, m);
      Xt = G.block(0, s, s, m);
      above.solveInPlace(Xt);
      H.noalias() -= G.block(s, 0, m, s) * Xt;
      H.diagonal().array() += lambda2;
      Eigen::LLT<MatrixRef> level_llt(H);
      level_llt.solveInPlace(r);
      c.segment(s, m) += r;
      c.head(s).noalias() -= Xt * r;
    } else {
      H.diagonal().array() += lambda2;
      Eigen::LLT<MatrixRef> level_llt(H);
      level_llt.solveInPlace(r);
      c.segment(s, m) += r;
    }
  }
  auto step = s_.step.head(cols_);
  step.noalias() = J.topLeftCorner(rows_, cols_).transpose() * c;
  for (int col = 0; col < cols_; ++col) {
    step(col) *= s_.locked[col] ? 0.0 : s_.dof_weight[col];
  }
  // Scale the whole step down to the per-iteration caps.
  double scale = 1.0;
  int col = 0;
  if (translates_) {
    const double t = step.head<3>().norm();
    if (t > kMaxRootStep) scale = kMaxRootStep / t;
    col = 3;
  }
  while (col < cols_) {
    const int j = s_.dof_joint[col];
    const int count = skeleton_.joint(j).type == JointType::kBall ? 3 : 1;
    const double a = step.segment(col, count).norm();
    if (a * scale > kMaxJointStep) scale = kMaxJointStep / a;
    col += count;
  }
  if (scale < 1.0) step *= scale;
}

bool FullBodySolve::ApplyStep() {
  const auto step = s_.step.head(cols_);
  int col = 0;
  if (translates_) {
    pose_.local[root_].translation += body_ * step.head<3>();
    col = 3;
  }
  bool clamped = false;
  while (col < cols_) {
    const int j = s_.dof_joint[col];
    const Joint& joint = skeleton_.joint(j);
    Quaterniond& local = pose_.local[j].rotation;
    int count = 1;
    if (joint.type == JointType::kBall) {
      count = 3;
      const Quaterniond& parent =
          j == root_ ? root_parent_.rotation
                     : s_.globals[skeleton_.joint(j).parent].rotation;
      local = Exp(RotateVector(parent.conjugate(), step.segment<3>(col))) *
              local;
    } else {
      local = local * AxisAngle(joint.axis, step(col));
    }
    local.normalize();
    if (joint.IsConstrained()) {
      const Quaterniond inside = ConstrainRotation(joint, local).normalized();
      if (AngleBetween(inside, local) > kClampedBy) {
        for (int a = 0; a < count; ++a) {
          if (!s_.locked[col + a]) clamped = true;
          s_.locked[col + a] = 1;
        }
      }
      local = inside;
    }
    col += count;
  }
  return clamped;
}

void FullBodySolve::ApplyPoles() {
  ForwardKinematics();
  const int m = static_cast<int>(s_.goal_order.size());
  for (int k = 0; k < m; ++k) {
    const Goal& goal = goals_[s_.goal_order[k]];
    if (!goal.pole) continue;
    const int e = s_.effector[k];
    const int lr = LimbRootOf(skeleton_, goal);
    if (!s_.active[lr]) continue;  // Above the solver root: fixed.
    const Vector3d origin = s_.globals[lr].translation;
    Vector3d line = s_.globals[e].translation - origin;
    const double reach = line.norm();
    if (!(reach > 1e-12 * body_)) continue;
    line /= reach;
    Vector3d bend = Vector3d::Zero();
    double length = 0.0;
    for (int j = skeleton_.joint(e).parent; j != lr;
         j = skeleton_.joint(j).parent) {
      const Vector3d off = s_.globals[j].translation - origin;
      bend += off - off.dot(line) * line;
      length += (s_.globals[j].translation -
                 s_.globals[skeleton_.joint(j).parent].translation)
                    .norm();
    }
    const Vector3d to_pole = *goal.pole - origin;
    const Vector3d want = to_pole - to_pole.dot(line) * line;
    if (!(bend.norm() > 1e-4 * std::max(length, reach)) ||
        !(want.norm() > 1e-9 * body_)) {
      continue;
    }
    const double angle =
        std::atan2(line.dot(bend.cross(want)), bend.dot(want));
    if (!(std::abs(angle) > 1e-9)) continue;
    const Joint& joint = skeleton_.joint(lr);
    const Quaterniond parent =
        lr == root_ ? root_parent_.rotation
                    : s_.globals[joint.parent].rotation;
    double turn = angle;
    if (joint.IsConstrained()) {
      turn = NearestFeasibleTurn(joint, parent, s_.globals[lr].rotation, line,
                                 angle, std::min(angle, 0.0),
                                 std::max(angle, 0.0));
      if (!std::isfinite(turn)) continue;
    }
    pose_.local[lr].rotation =
        (parent.conjugate() * (AxisAngle(line, turn) * s_.globals[lr].rotation))
            .normalized();
    if (joint.IsConstrained()) {
      pose_.local[lr].rotation =
          ConstrainRotation(joint, pose_.local[lr].rotation).normalized();
    }
    ForwardKinematics();
  }
}

void FullBodySolve::SaveLocals(std::vector<Transform>& to) const {
  for (int j : s_.active_joints) to[j] = pose_.local[j];
}
void FullBodySolve::RestoreLocals(const std::vector<Transform>& from) {
  for (int j : s_.active_joints) pose_.local[j] = from[j];
}

bool FullBodySolve::Better(const std::array<double, kMaxPriority + 1>& a,
                           const std::array<double, kMaxPriority + 1>& b) const {
  for (int level = 0; level < num_levels_; ++level) {
    const double slack = 1e-24 + 1e-9 * std::max(a[level], b[level]);
    if (a[level] < b[level] - slack) return true;
    if (a[level] > b[level] + slack) return false;
  }
  return false;
}

int FullBodySolve::Run(const Deadline& deadline, int max_iterations) {
  if (options_.root_mode == RootMode::kPrePull && translates_) {
    // Move the root by the weighted mean displacement its position goals
    // ask of their effectors.
    ForwardKinematics();
    Vector3d sum = Vector3d::Zero();
    double weights = 0.0;
    for (size_t k = 0; k < s_.goal_order.size(); ++k) {
      const Goal& goal = goals_[s_.goal_order[k]];
      if (goal.aim_axis) continue;
      sum += goal.weight * (goal.target - s_.globals[s_.effector[k]].translation);
      weights += goal.weight;
    }
    if (weights > 0.0) pose_.local[root_].translation += sum / weights;
  }
  if (has_poles_) ApplyPoles();
  ForwardKinematics();
  std::array<double, kMaxPriority + 1> best{};
  bool have_best = false;
  int iterations = 0;
  for (;; ++iterations) {
    const bool reached = Evaluate();
    if (!have_best || Better(level_excess_, best)) {
      best = level_excess_;
      have_best = true;
      SaveLocals(s_.best_locals);
    }
    if (reached || iterations >= max_iterations) break;
    if (iterations % 4 == 3 && deadline.Expired()) break;
    std::fill(s_.locked.begin(), s_.locked.end(), 0);
    SaveLocals(s_.saved_locals);
    ComputeStep();
    if (ApplyStep()) {
      // Joints hit their limits: the step again without them, so the
      // others take up the motion.
      RestoreLocals(s_.saved_locals);
      Evaluate();
      ComputeStep();
      ApplyStep();
    }
    if (s_.step.head(cols_).lpNorm<Eigen::Infinity>() < 1e-12) {
      ++iterations;
      ForwardKinematics();
      break;
    }
    if (has_poles_) ApplyPoles();
    ForwardKinematics();
  }
  RestoreLocals(s_.best_locals);
  return std::max(iterations, 1);
}

}  // namespace

int SolveFullBody(const Skeleton& skeleton, absl::Span<const Goal> goals,
                  const FullBodyOptions& options, const Deadline& deadline,
                  FullBodyScratch& scratch, Pose* pose,
                  absl::Span<GoalResult> results) {
  FullBodySolve solve(skeleton, goals, options, scratch, pose);
  int iterations = 0;
  if (solve.Setup(results)) {
    iterations = solve.Run(deadline.WithBudget(options.time_budget_ms),
                           options.max_iterations > 0 ? options.max_iterations
                                                      : kDefaultIterations);
  }
  for (size_t i = 0; i < goals.size(); ++i) {
    if (IsFullBody(goals[i])) results[i].iterations = iterations;
  }
  return iterations;
}

}  // namespace reach
