// The full-body problem: validating a request (ValidateFullBody), the
// public helpers of full_body.h, and FullBodySolve's set-up (problem.h):
// the goals' order, rows and levels, the columns and which goals share
// them.

#include "solvers/full_body/problem.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "solvers/solve.h"

namespace reach {
namespace {

using Eigen::Quaterniond;
using Eigen::Vector3d;
using full_body_internal::IsFullBody;

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
  return FieldName{"goals", i, field}.ToString();
}

int ResolveRoot(const Skeleton& skeleton, absl::Span<const Goal> goals,
                const FullBodyOptions& options) {
  if (options.root_joint >= 0) return options.root_joint;
  for (const Goal& goal : goals) {
    if (IsFullBody(goal)) return TopRoot(skeleton, EffectorOf(skeleton, goal));
  }
  return -1;
}

// Orders goals by content, so the problem does not depend on the order
// they came in: priority, effector, kind, then every number.
auto SortKey(const Skeleton& skeleton, const Goal& g) {
  const Quaterniond q = g.target_orientation.value_or(Quaterniond(0, 0, 0, 0));
  const Vector3d aim = g.aim_axis.value_or(Vector3d::Zero());
  const Vector3d pole = g.pole.value_or(Vector3d::Zero());
  return std::make_tuple(
      g.priority, EffectorOf(skeleton, g), g.aim_axis.has_value(),
      g.target_orientation.has_value(), g.pole.has_value(), g.target.x(),
      g.target.y(), g.target.z(), q.w(), q.x(), q.y(), q.z(), aim.x(), aim.y(),
      aim.z(), pole.x(), pole.y(), pole.z(), g.weight, g.options.tolerance,
      g.options.orientation_tolerance_rad, LimbRootOf(skeleton, g));
}

}  // namespace

int EffectorOf(const Skeleton& skeleton, const Goal& goal) {
  return goal.chain >= 0 ? skeleton.chain(goal.chain).joints.back()
                         : goal.tip_joint;
}

int LimbRootOf(const Skeleton& skeleton, const Goal& goal) {
  if (goal.chain >= 0) return skeleton.chain(goal.chain).joints.front();
  if (goal.root_joint >= 0) return goal.root_joint;
  const int parent = skeleton.joint(goal.tip_joint).parent;
  return parent < 0 ? -1 : skeleton.joint(parent).parent;
}

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
  // Unit directions first: an axis or a distance whose norm overflows
  // (finite components near 1e300) would turn the products below to inf.
  const Vector3d to = (target - effector.translation).stableNormalized();
  const Vector3d aim =
      RotateVector(effector.rotation, aim_axis.stableNormalized());
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
  if (!(options.root_translation_stiffness >= 0.0 &&
        options.root_translation_stiffness <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("full_body.root_translation_stiffness = ",
                     options.root_translation_stiffness, " is outside [0, 1]"));
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
  if (std::isinf(options.plant_height)) {
    return absl::InvalidArgumentError(
        absl::StrCat("full_body.plant_height = ", options.plant_height,
                     " is not finite (NaN: no floor)"));
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
            Field(i, "pole"),
            ": the limb whose bend faces the pole needs "
            "three joints or more, and effector \"",
            skeleton.joint(effector).name, "\" has no grandparent"));
      }
      if (skeleton.joint(limb_root).type != JointType::kBall) {
        return absl::InvalidArgumentError(absl::StrCat(
            Field(i, "pole"),
            ": the limb turns about its root to face the "
            "pole, and its root joint \"",
            skeleton.joint(limb_root).name, "\" is not a ball joint"));
      }
    }
  }
  return absl::OkStatus();
}

namespace full_body_internal {
namespace {

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

}  // namespace

bool FullBodySolve::Setup(absl::Span<GoalResult> results) {
  const int n = skeleton_.num_joints();
  root_ = ResolveRoot(skeleton_, goals_, options_);
  s_.goal_order.clear();
  s_.tolerance.resize(goals_.size());
  s_.orientation_tolerance.resize(goals_.size());
  s_.demoted.assign(goals_.size(), 0);
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
    s_.tolerance[i] = r.tolerance;
    s_.orientation_tolerance[i] = r.orientation_tolerance_rad;
    if (goal.weight > 0.0) s_.goal_order.push_back(i);
  }
  if (s_.goal_order.empty() || root_ < 0) return false;
  const int m = static_cast<int>(s_.goal_order.size());
  s_.effector.resize(m);
  s_.goal_row.resize(m + 1);
  s_.goal_excess.resize(m);
  s_.saved_goal_excess.resize(m);
  s_.start_excess.resize(goals_.size());
  // For a second attempt (SolveFullBody): sized here, so that a solve
  // that makes one allocates nothing once a first solve has run.
  s_.first_locals.reserve(n);
  s_.first_excess.reserve(goals_.size());
  s_.second_excess.reserve(goals_.size());
  Arrange();

  // Joints on a root-effector path (active), and those whose rotation moves
  // an effector (a strict ancestor of one, or the effector of an
  // orientation or look-at goal): these get columns.
  s_.active.assign(n, 0);
  s_.drives.assign(n, 0);
  num_poles_ = 0;
  for (int k = 0; k < m; ++k) {
    const Goal& goal = goals_[s_.goal_order[k]];
    const int e = s_.effector[k];
    if (goal.target_orientation || goal.aim_axis) s_.drives[e] = 1;
    for (int j = e;; j = skeleton_.joint(j).parent) {
      s_.active[j] = 1;
      if (j != e) s_.drives[j] = 1;
      if (j == root_) break;
    }
    if (goal.pole) ++num_poles_;
  }
  // The caller's poles (the body model's preferred bends leave a cone
  // free; a caller's leaves none): the limb bends toward it as a ball.
  s_.caller_pole.assign(n, 0);
  for (int k = 0; k < m && places_body_; ++k) {
    const int i = s_.goal_order[k];
    const Goal& goal = goals_[i];
    if (!goal.pole || s_.pole_cone[i] > 0.0) continue;
    const int lr = LimbRootOf(skeleton_, goal);
    for (int j = skeleton_.joint(s_.effector[k]).parent; j >= 0 && j != lr;
         j = skeleton_.joint(j).parent) {
      s_.caller_pole[j] = 1;
    }
  }

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
    const double stiffness =
        model_ != nullptr ? s_.body_stiffness[j] : joint.stiffness;
    if (!s_.drives[j] || stiffness >= 1.0 || joint.type == JointType::kFixed ||
        (j == root_ && pinned) || (model_ != nullptr && model_->fixed[j])) {
      continue;
    }
    s_.dof_start[j] = static_cast<int>(s_.dof_joint.size());
    const int count = joint.type == JointType::kBall ? 3 : 1;
    const bool hinge = Hinged(j);
    for (int a = 0; a < count; ++a) {
      s_.dof_joint.push_back(j);
      s_.dof_weight.push_back(std::sqrt(
          1.0 - (hinge && a > 0 ? std::max(stiffness, kHingeSideStiffness)
                                : stiffness)));
    }
  }
  cols_ = static_cast<int>(s_.dof_joint.size());
  PairColumns();
  s_.ball_bounds.resize(n);
  constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
  s_.bounds_of.resize(n, {kNone, kNone, kNone});
  for (int j : s_.active_joints) {
    const Joint& joint = skeleton_.joint(j);
    if (s_.dof_start[j] < 0 || joint.type != JointType::kBall) continue;
    const std::array<double, 3> limits = {
        joint.max_swing_rad, joint.min_angle_rad, joint.max_angle_rad};
    if (limits != s_.bounds_of[j]) {
      s_.ball_bounds[j] = HalfAngleBounds(joint);
      s_.bounds_of[j] = limits;
    }
  }
  // A start outside the limits is brought into them first: every joint
  // the solve turns steps from a rotation its limits allow, and none is
  // returned outside them.
  for (int j : s_.active_joints) {
    const Joint& joint = skeleton_.joint(j);
    if (s_.dof_start[j] < 0 || !joint.IsConstrained() ||
        InsideBallLimits(j, pose_.local[j].rotation)) {
      continue;
    }
    ProjectIntoLimits(joint, &pose_.local[j].rotation);
  }
  s_.locked.assign(cols_, 0);
  s_.scale.resize(cols_);
  s_.axis.resize(cols_);
  s_.saved_axis.resize(cols_);
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
  Reserve(s_.saved_jacobian, rows_, cols_);
  Reserve(s_.saved_error, rows_);
  Reserve(s_.gram, rows_, rows_);
  Reserve(s_.cross, rows_, rows_);
  Reserve(s_.small, rows_, rows_);
  Reserve(s_.error, rows_);
  Reserve(s_.coeffs, rows_);
  Reserve(s_.rhs, std::max(rows_, cols_));
  Reserve(s_.step, cols_);
  Reserve(s_.delta, cols_);
  Reserve(s_.delta_coeffs, rows_);
  s_.saved_locals.resize(n);
  return true;
}

void FullBodySolve::Arrange() {
  std::sort(s_.goal_order.begin(), s_.goal_order.end(), [&](int a, int b) {
    const auto ka = std::make_tuple(goals_[a].priority, s_.demoted[a],
                                    SortKey(skeleton_, goals_[a]));
    const auto kb = std::make_tuple(goals_[b].priority, s_.demoted[b],
                                    SortKey(skeleton_, goals_[b]));
    if (ka != kb) return ka < kb;
    return a < b;
  });
  const int m = static_cast<int>(s_.goal_order.size());
  rows_ = 0;
  num_levels_ = 0;
  int last_level = -1;
  int last_priority = -1;
  double weight = 1e2;
  for (int k = 0; k < m; ++k) {
    const int i = s_.goal_order[k];
    const Goal& goal = goals_[i];
    s_.effector[k] = EffectorOf(skeleton_, goal);
    const int level = 2 * goal.priority + s_.demoted[i];
    if (level != last_level) {
      if (goal.priority != last_priority) weight *= 1e-2;
      last_priority = goal.priority;
      level_weight_[num_levels_] = weight * (s_.demoted[i] ? 1e-1 : 1.0);
      level_start_[num_levels_++] = rows_;
      last_level = level;
    }
    s_.goal_row[k] = rows_;
    rows_ += RowsOf(goal);
  }
  level_start_[num_levels_] = rows_;
  s_.goal_row[m] = rows_;
  active_levels_ = num_levels_;
}

void FullBodySolve::PairColumns() {
  // The columns each goal's rows can be non-zero in (the root's
  // translation for a position goal, its effector's path), ascending, and
  // those two goals share: the Gram matrix is summed over them only (a
  // foot and a hand share the pelvis and little else).
  factor_current_ = false;  // After Arrange: new rows and levels.
  const int m = static_cast<int>(s_.goal_order.size());
  const int n = skeleton_.num_joints();
  // They depend on these only: unchanged, the lists stand.
  std::vector<int>& key = s_.columns_key;
  const size_t key_size = 4 + m + 3 * n;
  bool same = key.size() == key_size && key[0] == m && key[1] == n &&
              key[2] == root_ && key[3] == static_cast<int>(translates_);
  for (int k = 0; same && k < m; ++k) same = key[4 + k] == s_.effector[k];
  for (int j = 0; same && j < n; ++j) {
    const Joint& joint = skeleton_.joint(j);
    same = key[4 + m + 3 * j] == joint.parent &&
           key[5 + m + 3 * j] == static_cast<int>(joint.type) &&
           key[6 + m + 3 * j] == s_.dof_start[j];
  }
  if (same) return;
  key.resize(key_size);
  key[0] = m;
  key[1] = n;
  key[2] = root_;
  key[3] = static_cast<int>(translates_);
  for (int k = 0; k < m; ++k) key[4 + k] = s_.effector[k];
  for (int j = 0; j < n; ++j) {
    const Joint& joint = skeleton_.joint(j);
    key[4 + m + 3 * j] = joint.parent;
    key[5 + m + 3 * j] = static_cast<int>(joint.type);
    key[6 + m + 3 * j] = s_.dof_start[j];
  }
  s_.goal_cols.clear();
  s_.goal_col_start.resize(m + 1);
  for (int k = 0; k < m; ++k) {
    s_.goal_col_start[k] = static_cast<int>(s_.goal_cols.size());
    if (translates_) {
      for (int a = 0; a < 3; ++a) s_.goal_cols.push_back(a);
    }
    const size_t first = s_.goal_cols.size();
    for (int j = s_.effector[k];; j = skeleton_.joint(j).parent) {
      for (int c = s_.dof_start[j], end = c + DofCount(j); c < end; ++c) {
        s_.goal_cols.push_back(c);
      }
      if (j == root_) break;
    }
    std::sort(s_.goal_cols.begin() + first, s_.goal_cols.end());
  }
  s_.goal_col_start[m] = static_cast<int>(s_.goal_cols.size());
  s_.pair_cols.clear();
  s_.pair_col_start.clear();
  for (int a = 0; a < m; ++a) {
    for (int b = a; b < m; ++b) {
      s_.pair_col_start.push_back(static_cast<int>(s_.pair_cols.size()));
      std::set_intersection(s_.goal_cols.begin() + s_.goal_col_start[a],
                            s_.goal_cols.begin() + s_.goal_col_start[a + 1],
                            s_.goal_cols.begin() + s_.goal_col_start[b],
                            s_.goal_cols.begin() + s_.goal_col_start[b + 1],
                            std::back_inserter(s_.pair_cols));
    }
  }
  s_.pair_col_start.push_back(static_cast<int>(s_.pair_cols.size()));
}

}  // namespace full_body_internal
}  // namespace reach
