#include "solvers/full_body.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "solvers/bend_plane.h"
#include "solvers/body_model.h"
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
constexpr double kMinDamping = 0.003;
constexpr double kMaxDamping = 10.0;
// The largest position (body sizes) and orientation (radians) error one
// step aims to remove: far targets pull steadily instead of flinging.
// (Orientation 0.3: from rest on solver_bench's gameplay poses, whose feet
// turn by up to ~1.5 rad, 5.19 -> 4.88 iterations; 0.35 and more, or a
// larger position clamp, made the CMU hop's steps larger.)
constexpr double kMaxStepError = 0.25;
constexpr double kMaxTurnError = 0.3;
// Regularises the Gram matrix of the levels above when projecting a level
// into their null space (rank-deficient stacks: a foot's position and
// orientation at a locked ankle).
constexpr double kProjectionRegulariser = 1e-9;
// Largest rotation of one joint, and translation of the root (in body
// sizes), in one iteration: the step is scaled down as a whole to fit.
// (Measured from rest on solver_bench's gameplay poses, whose feet turn by
// up to ~1.5 rad: 0.35 -> 0.6 takes 5.69 -> 5.19 iterations, 0.8 and 1.0
// no fewer; the CMU streams' steps in the README.)
constexpr double kMaxJointStep = 0.6;
constexpr double kMaxRootStep = 0.2;
// A joint projected back onto its limits by more than this (radians) is
// held at the limit for the rest of the iteration's step (and for a chord
// step after it, which reuses that step's factorisation).
constexpr double kClampedBy = 1e-7;
// How far (radians) a pole's swivel may leave a joint outside its limits.
constexpr double kLimitSlack = 1e-9;
// Levels of the problem: each priority, then its demoted goals.
constexpr int kMaxLevels = 2 * (kMaxPriority + 1);
using Levels = std::array<double, kMaxLevels>;
// Iterations between checks for a stalled solve, and the share of the
// merit those iterations must remove.
constexpr int kStallWindow = 8;
// Chord steps: after a full step whose largest joint rotation (radians) or
// root move (body sizes) was below kChordStep and which cut the merit to
// below kChordProgress of what it was (Gauss-Newton's fast regime, where
// the Jacobian barely changes), the next step, one only, reuses its
// factorisation. (Measured on solver_bench's warm-started humanoid: p50
// 23.1 -> 18.9 us; a second chord step in a row, or a longer or slower
// step before one, cost more iterations than they saved.)
constexpr double kChordStep = 0.05;
constexpr double kChordProgress = 0.01;
constexpr double kStallProgress = 0.5;

bool IsFullBody(const Goal& goal) {
  return goal.solver == SolverKind::kFullBody;
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

// Rows a goal adds: position 3, orientation 3, look-at 2.
constexpr int kMaxGoalRows = 6;
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

// `local` (a joint's local rotation, whose parent's model-space rotation
// is `parent`) turned in model space by the rotation vector `turn` about the
// joint: parent^-1 exp(turn) parent local.
Quaterniond TurnedLocal(const Quaterniond& parent, const Vector3d& turn,
                        const Quaterniond& local) {
  const Vector3d v = RotateVector(parent.conjugate(), turn);
  static_assert(kMaxJointStep < 0.7, "the series below covers 0.7 rad");
  // The unit quaternion of rotation vector v (cos |v|/2, sin(|v|/2) v/|v|)
  // by its series up to a step's largest turn (kMaxJointStep; the terms
  // left out are below 1e-14 up to 0.7 rad): sincos cost a tenth of a
  // step's time.
  const double t = v.squaredNorm();
  Quaterniond exp;
  if (t < 0.49) {
    const double w =
        1.0 +
        t * (-1.0 / 8 +
             t * (1.0 / 384 +
                  t * (-1.0 / 46080 +
                       t * (1.0 / 10321920 + t * (-1.0 / 3715891200)))));
    const double s =
        0.5 +
        t * (-1.0 / 48 +
             t * (1.0 / 3840 +
                  t * (-1.0 / 645120 +
                       t * (1.0 / 185794560 + t * (-1.0 / 81749606400)))));
    exp = Quaterniond(w, s * v.x(), s * v.y(), s * v.z());
  } else {
    exp = FromRotationVector(v);
  }
  return (exp * local).normalized();
}

// Subtracts from column j of the factor at `a` (entries j..n-1) the
// updates of its final columns k_begin..k_end-1, four columns per pass
// (the passes are short, n ~ 20).
inline __attribute__((always_inline)) void CholeskyUpdate(
    double* a, Eigen::Index stride, int n, int j, int k_begin, int k_end) {
  double* __restrict cj = a + j * stride;
  int k = k_begin;
  for (; k + 4 <= k_end; k += 4) {
    const double* __restrict c0 = a + k * stride;
    const double* __restrict c1 = c0 + stride;
    const double* __restrict c2 = c1 + stride;
    const double* __restrict c3 = c2 + stride;
    const double f0 = c0[j], f1 = c1[j], f2 = c2[j], f3 = c3[j];
    for (int i = j; i < n; ++i) {
      cj[i] -= (c0[i] * f0 + c1[i] * f1) + (c2[i] * f2 + c3[i] * f3);
    }
  }
  for (; k < k_end; ++k) {
    const double* __restrict ck = a + k * stride;
    const double f = ck[j];
    for (int i = j; i < n; ++i) cj[i] -= ck[i] * f;
  }
}

// Finishes column j of the factor once its updates are in: the pivot (a
// pivot below `floor`, rounding on a singular Gram matrix, is raised to
// it) and the entries below it divided by it.
void CholeskyPivot(double* a, Eigen::Index stride, int n, int j,
                   double floor) {
  double* __restrict cj = a + j * stride;
  const double d = std::sqrt(std::max(cj[j], floor));
  cj[j] = d;
  const double inverse = 1.0 / d;
  for (int i = j + 1; i < n; ++i) cj[i] *= inverse;
}

// In-place Cholesky of the n x n block at `a` (column-major, columns
// `stride` apart; lower triangle read and written): a = L L^T.
// Left-looking: each column takes the updates of the final columns before
// it down its contiguous entries.
void CholeskyInPlace(double* a, Eigen::Index stride, int n, double floor) {
  for (int j = 0; j < n; ++j) {
    CholeskyUpdate(a, stride, n, j, 0, j);
    CholeskyPivot(a, stride, n, j, floor);
  }
}

// CholeskyInPlace of the block at `a`, whose rows and columns form
// consecutive blocks (block b: from start[b] to start[b + 1]); for the
// first `blocks` of them, also the Schur complement of each block after
// the blocks before it, written to the lower triangle of the same block
// of `schur`: S_b = A_bb - L_b,<b L_b,<b^T = L_bb L_bb^T (a column of the
// factor holds it once the earlier blocks' updates are in; but for pivots
// raised to `floor`, where L_bb L_bb^T would carry the raise).
void CholeskyWithSchur(double* a, Eigen::Index stride, int n, double floor,
                       const int* start, int blocks, double* schur,
                       Eigen::Index schur_stride) {
  int b = 0;
  for (int j = 0; j < n; ++j) {
    while (j >= start[b + 1]) ++b;
    CholeskyUpdate(a, stride, n, j, 0, start[b]);
    if (b < blocks) {
      const double* cj = a + j * stride;
      double* sj = schur + j * schur_stride;
      for (int i = j; i < start[b + 1]; ++i) sj[i] = cj[i];
    }
    CholeskyUpdate(a, stride, n, j, start[b], j);
    CholeskyPivot(a, stride, n, j, floor);
  }
}

// Solves (L L^T) x = b in place for the factor CholeskyInPlace left at `l`.
void CholeskySolveInPlace(const double* l, Eigen::Index stride, int n,
                          double* b) {
  for (int i = 0; i < n; ++i) {
    double v = b[i];
    for (int k = 0; k < i; ++k) v -= l[i + k * stride] * b[k];
    b[i] = v / l[i + i * stride];
  }
  for (int i = n - 1; i >= 0; --i) {
    double v = b[i];
    for (int k = i + 1; k < n; ++k) v -= l[k + i * stride] * b[k];
    b[i] = v / l[i + i * stride];
  }
}

// The Gram block of two goals' rows (Nb x Na, into `block`) over the
// columns they share: each column adds the outer product of the two
// goals' entries in it (contiguous in the column-major Jacobian), scaled by
// the column's `scale`. Fixed sizes let the compiler unroll the product.
template <int Na, int Nb>
void GramBlock(const Eigen::MatrixXd& J, const double* scale, int ra, int rb,
               const int* cols, int count,
               double block[kMaxGoalRows][kMaxGoalRows]) {
  double sum[Nb][Na] = {};
  for (int p = 0; p < count; ++p) {
    const double* ja = &J(ra, cols[p]);
    const double* jb = &J(rb, cols[p]);
    double sb[Nb];
    for (int i = 0; i < Nb; ++i) sb[i] = scale[cols[p]] * jb[i];
    for (int i = 0; i < Nb; ++i) {
      for (int k = 0; k < Na; ++k) sum[i][k] += sb[i] * ja[k];
    }
  }
  for (int i = 0; i < Nb; ++i) {
    for (int k = 0; k < Na; ++k) block[i][k] = sum[i][k];
  }
}

template <int Na>
void GramBlockB(const Eigen::MatrixXd& J, const double* scale, int ra, int rb,
                int nb, const int* cols, int count,
                double block[kMaxGoalRows][kMaxGoalRows]) {
  switch (nb) {
    case 2: return GramBlock<Na, 2>(J, scale, ra, rb, cols, count, block);
    case 3: return GramBlock<Na, 3>(J, scale, ra, rb, cols, count, block);
    default: return GramBlock<Na, 6>(J, scale, ra, rb, cols, count, block);
  }
}

// A look-at goal's frame at the effector `ge`: its aim in model space,
// two directions across it, and the unit direction to the target (the aim
// when the target is at the effector).
struct LookAt {
  LookAt(const Transform& ge, const Vector3d& aim_axis, const Vector3d& target)
      : aim(RotateVector(ge.rotation, aim_axis.stableNormalized())),
        b1(aim.unitOrthogonal()),
        b2(aim.cross(b1)) {
    const Vector3d to = target - ge.translation;
    distance = to.norm();
    d = distance > 0.0 ? Vector3d(to / distance) : aim;
  }
  Vector3d aim, b1, b2, d;
  double distance;
};

// delta(col) += J(row.., col) . dc(row..) over one goal's N rows, for each
// of its columns (the sum in row order, unrolled by the fixed size); J is
// column-major, its columns `stride` apart.
template <int N, typename Coeffs, typename Delta>
void AddTransposed(const double* J, Eigen::Index stride, int row,
                   const int* cols, int count, const Coeffs& dc,
                   Delta& delta) {
  double d[N];
  for (int r = 0; r < N; ++r) d[r] = dc(row + r);
  for (int p = 0; p < count; ++p) {
    const double* j = J + row + cols[p] * stride;
    double sum = 0.0;
    for (int r = 0; r < N; ++r) sum += j[r] * d[r];
    delta(cols[p]) += sum;
  }
}

// The solve of one request's full-body goals.
class FullBodySolve {
 public:
  // `model`: the body model in use, or null.
  FullBodySolve(const Skeleton& skeleton, absl::Span<const Goal> goals,
                const FullBodyOptions& options, FullBodyScratch& s, Pose* pose,
                const BodyModel* model)
      : skeleton_(skeleton),
        goals_(goals),
        options_(options),
        s_(s),
        pose_(*pose),
        model_(model),
        body_(BodySize(skeleton)) {}

  // Sets up the problem; false when there is nothing to solve.
  bool Setup(absl::Span<GoalResult> results);
  // Runs the solve from the pose; returns the iterations.
  int Run(const Deadline& deadline, int max_iterations);
  // After Run: whether every goal was reached.
  bool Reached() const { return reached_; }
  // After Run: each goal's excess of the pose as it is, by goal of the
  // request (0 for the others), in `to`.
  void ExcessByGoal(std::vector<double>& to);
  // After ExcessByGoal, with `start` the rest pose Run started from (a
  // new character's): when an unreached goal (not a look-at) is within
  // reach, sets the pose to `start` with every hinge that turns for a goal
  // and has a range with two ends (its straight knees and elbows) to the
  // middle of its range; returns whether there was one.
  bool BendRestingHinges(const std::vector<Transform>& start);

 private:
  // Sorts the goals (priority, demoted, content) into rows and levels.
  void Arrange();
  // The columns each goal and each pair of goals can be non-zero in.
  void PairColumns();
  // What the solve does when it stops progressing with levels unreached
  // (`excess`): returns whether it changed the problem (then the goals
  // must be evaluated again).
  bool OnStall(const Levels& excess);
  void ForwardKinematics();
  // The error rows and each goal's and level's excess (level_excess_) of
  // the current pose; returns whether every goal is reached. The
  // Jacobian is filled when a step needs it (Factor).
  bool Evaluate();
  void FillJacobian();
  void ComputeAxes();
  // Rotational columns of joint j (0 when it has none).
  int DofCount(int j) const {
    if (s_.dof_start[j] < 0) return 0;
    return skeleton_.joint(j).type == JointType::kBall ? 3 : 1;
  }
  // The prioritised step (in s_.step, model units / radians): Factor, then
  // SolveLevels.
  void ComputeStep(double damping) {
    Factor(damping);
    SolveLevels();
  }
  // Sets the columns' squared weights (locked ones to 0) and factors the
  // levels' Gram matrices J W^2 J^T; SolveLevels takes the step for the
  // current errors. A factorisation serves later errors too (a chord
  // step).
  void Factor(double damping);
  void SolveLevels();
  double MaxFraction() const;
  // Turns each pole limb's bend about its root-effector line to face its
  // pole; returns whether it turned any.
  bool ApplyPoles();
  // The inner joint nearest the middle of the limb root..effector.
  int MiddleJoint(int effector, int root) const {
    int count = 0;
    for (int j = skeleton_.joint(effector).parent; j != root;
         j = skeleton_.joint(j).parent) {
      ++count;
    }
    int mid = skeleton_.joint(effector).parent;
    for (int k = 0; k < count / 2; ++k) mid = skeleton_.joint(mid).parent;
    return mid;
  }
  // Applies s_.step to the pose, projecting onto limits; returns whether a
  // joint that has columns was clamped (and flags it in s_.locked).
  bool ApplyStep();
  // Whether limited ball joint j's `local` is strictly inside its limits
  // (false for other joints).
  bool InsideBallLimits(int j, const Quaterniond& local) const {
    const Joint& joint = skeleton_.joint(j);
    return joint.type == JointType::kBall &&
           StrictlyInside(joint, s_.ball_bounds[j], local);
  }
  void Unstraighten();
  // Two position goals whose targets are further apart than the bones
  // from the solver's root to their effectors can span, whatever the
  // pose, cannot both be reached: the later one, or within a level the
  // one further from its target, is solved after its level from the
  // start (not only after a stall: a far hand dragged a reachable one of
  // its level for the whole of the iterations).
  // Returns whether it demoted any (then the goals must be evaluated
  // again). After the start's Evaluate.
  bool DemoteOutOfReach();
  void SaveLocals(std::vector<Transform>& to) const;
  // The Jacobian, errors and axes of the pose before a trial step, kept
  // so an undone step needs no second evaluation (the Jacobian's buffers
  // trade places: the next Factor at the trial's pose fills the other
  // one).
  void SaveEvaluation() {
    std::swap(s_.jacobian, s_.saved_jacobian);
    std::swap(jacobian_current_, saved_jacobian_current_);
    s_.saved_error.head(rows_) = s_.error.head(rows_);
    std::copy(s_.axis.begin(), s_.axis.end(), s_.saved_axis.begin());
    std::copy(s_.goal_excess.begin(), s_.goal_excess.end(),
              s_.saved_goal_excess.begin());
    saved_excess_ = level_excess_;
  }
  void RestoreEvaluation() {
    std::swap(s_.jacobian, s_.saved_jacobian);
    std::swap(jacobian_current_, saved_jacobian_current_);
    s_.error.head(rows_) = s_.saved_error.head(rows_);
    std::copy(s_.saved_axis.begin(), s_.saved_axis.end(), s_.axis.begin());
    std::copy(s_.saved_goal_excess.begin(), s_.saved_goal_excess.end(),
              s_.goal_excess.begin());
    level_excess_ = saved_excess_;
  }
  void RestoreLocals(const std::vector<Transform>& from);
  bool Better(const Levels& a, const Levels& b) const;
  // The weighted sum of the active levels' excess from `level` on.
  double Merit(const Levels& excess, int level = 0) const;

  const Skeleton& skeleton_;
  absl::Span<const Goal> goals_;
  const FullBodyOptions& options_;
  FullBodyScratch& s_;
  Pose& pose_;
  const BodyModel* model_;
  const double body_;
  int root_ = -1;
  Transform root_parent_;
  bool translates_ = false;
  int rows_ = 0;
  int cols_ = 0;
  int num_levels_ = 0;
  std::array<int, kMaxLevels + 1> level_start_{};  // Rows, + end.
  Levels level_excess_{};
  Levels saved_excess_{};
  // Each level's weight in the merit: 1e-2 per priority present, a
  // priority's demoted goals 1e-1 of its others.
  Levels level_weight_{};
  // Levels the step is solved for (fewer while an earlier level is being
  // restored: restoring_, else -1), and the leading levels whose excess a
  // step may not increase (after a restoration).
  int active_levels_ = 0;
  int restoring_ = -1;
  int restored_steps_ = 0;  // Steps the restored level has been reached.
  int protected_levels_ = 0;
  int num_poles_ = 0;  // Goals with a pole.
  // Set when no step helped while every goal outside its tolerance was
  // within one tolerance more of it: the goals inside their tolerances
  // then ask for no motion (zero error rows), so the steps go to the
  // goals outside alone.
  bool focus_ = false;
  bool reached_ = false;  // Run's outcome.
  // Whether some goal is outside its tolerance, and every such goal within
  // twice its tolerances (position and orientation, each its own).
  bool NearlyReached() const;
  // Whether s_.jacobian (s_.saved_jacobian) holds the current (saved)
  // pose's Jacobian and axes.
  bool jacobian_current_ = false;
  bool saved_jacobian_current_ = false;
  // The storage of the Jacobian the last Factor used (the buffers trade
  // places, their storage does not move) and its column stride.
  const double* factored_jacobian_ = nullptr;
  Eigen::Index factored_stride_ = 0;
};

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
        model_ != nullptr ? model_->stiffness[j] : joint.stiffness;
    if (!s_.drives[j] || stiffness >= 1.0 ||
        joint.type == JointType::kFixed || (j == root_ && pinned) ||
        (model_ != nullptr && model_->fixed[j])) {
      continue;
    }
    s_.dof_start[j] = static_cast<int>(s_.dof_joint.size());
    const int count = joint.type == JointType::kBall ? 3 : 1;
    for (int a = 0; a < count; ++a) {
      s_.dof_joint.push_back(j);
      s_.dof_weight.push_back(std::sqrt(1.0 - stiffness));
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
  Reserve(s_.rhs, rows_);
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
      std::set_intersection(
          s_.goal_cols.begin() + s_.goal_col_start[a],
          s_.goal_cols.begin() + s_.goal_col_start[a + 1],
          s_.goal_cols.begin() + s_.goal_col_start[b],
          s_.goal_cols.begin() + s_.goal_col_start[b + 1],
          std::back_inserter(s_.pair_cols));
    }
  }
  s_.pair_col_start.push_back(static_cast<int>(s_.pair_cols.size()));
}

void FullBodySolve::ForwardKinematics() {
  for (int j : s_.active_joints) {
    s_.globals[j] = (j == root_ ? root_parent_
                                : s_.globals[skeleton_.joint(j).parent]) *
                    pose_.local[j];
  }
}

void FullBodySolve::ComputeAxes() {
  // Each rotational column turns its joint about a model-space axis: a
  // hinge about its own; a free ball about X, Y and Z; a limited ball about
  // its twist axis, its swing axis and the third one (so that a joint held
  // at its twist or swing limit leaves only that column out).
  for (int j : s_.active_joints) {
    const int c0 = s_.dof_start[j];
    if (c0 < 0) continue;
    const Joint& joint = skeleton_.joint(j);
    const Quaterniond& rotation = s_.globals[j].rotation;
    if (joint.type == JointType::kHinge) {
      s_.axis[c0] = RotateVector(rotation, joint.axis);
    } else if (!joint.IsLimited()) {
      s_.axis[c0] = Vector3d::UnitX();
      s_.axis[c0 + 1] = Vector3d::UnitY();
      s_.axis[c0 + 2] = Vector3d::UnitZ();
    } else {
      const Quaterniond at_rest =
          (j == root_ ? root_parent_.rotation
                      : s_.globals[joint.parent].rotation) *
          joint.rest.rotation;
      const Vector3d twist = RotateVector(rotation, joint.axis);
      Vector3d swing = RotateVector(at_rest, joint.axis).cross(twist);
      swing = swing.norm() > 1e-9 ? swing.normalized()
                                  : twist.unitOrthogonal();
      s_.axis[c0] = twist;
      s_.axis[c0 + 1] = swing;
      s_.axis[c0 + 2] = twist.cross(swing);
    }
  }
}

bool FullBodySolve::Evaluate() {
  jacobian_current_ = false;
  level_excess_.fill(0.0);
  bool all_reached = true;
  int level = 0;
  const int m = static_cast<int>(s_.goal_order.size());
  for (int k = 0; k < m; ++k) {
    const int row = s_.goal_row[k];
    while (row >= level_start_[level + 1]) ++level;
    const int i = s_.goal_order[k];
    const Goal& goal = goals_[i];
    const Transform& ge = s_.globals[s_.effector[k]];
    const double sw = std::sqrt(goal.weight);
    double excess = 0.0;
    if (goal.aim_axis) {
      // Look-at: two rows, the aim's turn across itself.
      const LookAt look(ge, *goal.aim_axis, goal.target);
      Vector3d turn = Vector3d::Zero();
      double angle = 0.0;
      if (look.distance > 0.0) {
        const Vector3d c = look.aim.cross(look.d);
        angle = std::atan2(c.norm(), look.aim.dot(look.d));
        turn = c.norm() > 1e-300 ? (angle / c.norm()) * c : angle * look.b1;
      }
      s_.error(row) = sw * look.b1.dot(turn);
      s_.error(row + 1) = sw * look.b2.dot(turn);
      excess = std::max(0.0, angle - s_.orientation_tolerance[i]);
    } else {
      const Vector3d miss = goal.target - ge.translation;
      const double miss_norm = miss.norm() / body_;
      s_.error.segment<3>(row) =
          (sw / body_) *
          (miss_norm > kMaxStepError ? (kMaxStepError / miss_norm) * miss : miss);
      excess = std::max(0.0, miss.norm() - s_.tolerance[i]) / body_;
      if (goal.target_orientation) {
        const Vector3d turn = RotationVector(
            goal.target_orientation->normalized() * ge.rotation.conjugate());
        const double angle = turn.norm();
        s_.error.segment<3>(row + 3) =
            sw * (angle > kMaxTurnError ? (kMaxTurnError / angle) * turn : turn);
        excess += std::max(0.0, angle - s_.orientation_tolerance[i]);
      }
    }
    if (excess > 0.0 && !s_.soft[i]) all_reached = false;
    s_.goal_excess[k] = goal.weight * excess * excess;
    level_excess_[level] += s_.goal_excess[k];
  }
  if (focus_) {
    for (int k = 0; k < m; ++k) {
      if (s_.goal_excess[k] > 0.0) continue;
      const int row = s_.goal_row[k];
      s_.error.segment(row, s_.goal_row[k + 1] - row).setZero();
    }
  }
  return all_reached;
}

bool FullBodySolve::NearlyReached() const {
  bool outside = false;
  for (size_t k = 0; k < s_.goal_order.size(); ++k) {
    const int i = s_.goal_order[k];
    if (!(s_.goal_excess[k] > 0.0) || s_.soft[i]) continue;
    outside = true;
    const Goal& goal = goals_[i];
    const Transform& ge = s_.globals[s_.effector[k]];
    double miss = 0.0, angle = 0.0;
    if (goal.aim_axis) {
      angle = AimError(ge, *goal.aim_axis, goal.target);
    } else {
      miss = (goal.target - ge.translation).norm();
      if (goal.target_orientation) {
        angle =
            ge.rotation.angularDistance(goal.target_orientation->normalized());
      }
    }
    if (!(miss <= 2.0 * s_.tolerance[i]) ||
        !(angle <= 2.0 * s_.orientation_tolerance[i])) {
      return false;
    }
  }
  return outside;
}

void FullBodySolve::FillJacobian() {
  // Only a goal's own rows in its own columns (s_.goal_cols) are written,
  // every one of them, and nothing else reads the Jacobian: no clearing.
  ComputeAxes();
  Eigen::MatrixXd& J = s_.jacobian;
  const int m = static_cast<int>(s_.goal_order.size());
  for (int k = 0; k < m; ++k) {
    const int row = s_.goal_row[k];
    const Goal& goal = goals_[s_.goal_order[k]];
    const int e = s_.effector[k];
    const Transform& ge = s_.globals[e];
    const double sw = std::sqrt(goal.weight);
    if (goal.aim_axis) {
      // A column turns the aim about its axis u, and moves the effector by
      // u x (effector - joint) (or by the root's translation), which turns
      // the direction to the target the other way: the turn left shrinks
      // by u + d x motion / distance, across the aim.
      const LookAt look(ge, *goal.aim_axis, goal.target);
      const double reach =
          look.distance > 1e-9 * body_ ? 1.0 / look.distance : 0.0;
      if (translates_) {
        for (int a = 0; a < 3; ++a) {
          const Vector3d moved = reach * look.d.cross(Vector3d::Unit(a));
          J(row, a) = sw * look.b1.dot(moved) * body_;
          J(row + 1, a) = sw * look.b2.dot(moved) * body_;
        }
      }
      for (int j = e;; j = skeleton_.joint(j).parent) {
        const Vector3d lever = ge.translation - s_.globals[j].translation;
        for (int c = s_.dof_start[j], end = c + DofCount(j); c < end; ++c) {
          const Vector3d& u = s_.axis[c];
          const Vector3d reduces = u + reach * look.d.cross(u.cross(lever));
          J(row, c) = sw * look.b1.dot(reduces);
          J(row + 1, c) = sw * look.b2.dot(reduces);
        }
        if (j == root_) break;
      }
    } else {
      const bool orient = goal.target_orientation.has_value();
      if (translates_) {
        J.block<3, 3>(row, 0) = sw * Eigen::Matrix3d::Identity();
        if (orient) J.block<3, 3>(row + 3, 0).setZero();
      }
      for (int j = e;; j = skeleton_.joint(j).parent) {
        const Vector3d v = (ge.translation - s_.globals[j].translation) / body_;
        for (int c = s_.dof_start[j], end = c + DofCount(j); c < end; ++c) {
          const Vector3d& u = s_.axis[c];
          J.block<3, 1>(row, c) = sw * u.cross(v);
          if (orient) J.block<3, 1>(row + 3, c) = sw * u;
        }
        if (j == root_) break;
      }
    }
  }
}

bool FullBodySolve::ApplyPoles() {
  bool turned = false;
  // Each pole limb's bend turns about the line from its root to its
  // effector (the swivel) until it faces the pole: the effector stays where
  // it is, and an effector with an orientation goal is turned back (within
  // its limits). A limb whose root and middle joint are balls swings at
  // the two (as far as their limits allow); one with a hinge at either
  // rolls as a whole about the line (a limited limb root takes the part of
  // the turn its limits allow). A nearly straight limb is bent across at
  // its middle joint instead (Unstraighten gives a straight one a bend
  // first). The model-space transforms must be current (Run keeps them
  // so: Unstraighten leaves them current, and so does every iteration).
  const int m = static_cast<int>(s_.goal_order.size());
  for (int k = 0; k < m; ++k) {
    const Goal& goal = goals_[s_.goal_order[k]];
    if (!goal.pole) continue;
    const int e = s_.effector[k];
    const int lr = LimbRootOf(skeleton_, goal);
    if (!s_.active[lr] || s_.dof_start[lr] < 0) continue;
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
    double angle = std::atan2(line.dot(bend.cross(want)), bend.dot(want));
    // A preferred bend (the body model's) leaves a cone free: the limb
    // turns only to its edge.
    const double cone = s_.pole_cone[s_.goal_order[k]];
    if (cone > 0.0) {
      if (std::abs(angle) <= cone) continue;
      angle -= std::copysign(cone, angle);
    }
    if (!(std::abs(angle) > 1e-9)) continue;
    if (std::abs(angle) > 0.1 && bend.norm() < 0.05 * length) {
      // A nearly straight limb: swivelling it to the pole would roll the
      // whole limb by up to half a turn (a pop on a stream, for a bend
      // that barely shows). It is bent across instead, at its middle
      // joint: the bend moves by delta to the pole's side (the lower bone
      // turns the other way, the effector moves by about twice delta and
      // the next iterations bring it back).
      const int mid = MiddleJoint(e, lr);
      const Joint& middle = skeleton_.joint(mid);
      if (middle.type != JointType::kBall || s_.dof_start[mid] < 0) continue;
      const Vector3d lower =
          s_.globals[e].translation - s_.globals[mid].translation;
      const Vector3d delta =
          std::max(bend.norm(), 0.01 * length) * want.normalized() - bend;
      const Vector3d axis = delta.cross(lower);
      if (!(axis.norm() > 0.0) || !(lower.norm() > 0.0)) continue;
      const double turn = 2.0 * delta.norm() / lower.norm();
      pose_.local[mid].rotation =
          ConstrainRotation(middle,
                            TurnedLocal(s_.globals[middle.parent].rotation,
                                        turn * axis.normalized(),
                                        pose_.local[mid].rotation))
              .normalized();
      ForwardKinematics();
      turned = true;
      continue;
    }
    const Joint& joint = skeleton_.joint(lr);
    const Quaterniond parent = lr == root_
                                   ? root_parent_.rotation
                                   : s_.globals[joint.parent].rotation;
    const Quaterniond effector_rotation = s_.globals[e].rotation;
    // A ball middle joint takes the new bend itself: the limb's root (a
    // ball) swings the upper part to the swivelled middle by the least
    // turn (no roll about the upper bone), and the middle joint swings the
    // lower part back onto the effector. Rolling the whole limb instead
    // would wind its root and effector up by the swivel's angle (half a
    // turn for a knee bent backwards), and a stream carries that twist
    // on. Where the limits stop the swings short, the limb swivels as far
    // as they allow.
    const int mid = MiddleJoint(e, lr);
    const Joint& middle = skeleton_.joint(mid);
    const Vector3d effector = s_.globals[e].translation;
    const Vector3d upper = s_.globals[mid].translation - origin;
    const Vector3d lower = effector - s_.globals[mid].translation;
    bool swung = false;
    if (joint.type == JointType::kBall && middle.type == JointType::kBall &&
        s_.dof_start[mid] >= 0 && upper.norm() > 1e-6 * length &&
        lower.norm() > 1e-6 * length) {
      const Quaterniond root_global = s_.globals[lr].rotation;
      const Quaterniond middle_global = s_.globals[mid].rotation;
      const Quaterniond middle_parent = s_.globals[middle.parent].rotation;
      Quaterniond root_local, middle_local;
      // The two joints' local rotations for a swivel by `turn` (every joint
      // from the root to the middle's parent turns with the root's swing);
      // returns whether both are within their limits.
      auto swivel = [&](double turn) {
        const Quaterniond swing =
            Quaterniond::FromTwoVectors(upper, AxisAngle(line, turn) * upper);
        const Quaterniond bend = Quaterniond::FromTwoVectors(
            swing * lower, effector - (origin + swing * upper));
        root_local = (parent.conjugate() * (swing * root_global)).normalized();
        middle_local = ((swing * middle_parent).conjugate() *
                        (bend * (swing * middle_global)))
                           .normalized();
        return WithinLimits(joint, root_local, kLimitSlack) &&
               WithinLimits(middle, middle_local, kLimitSlack);
      };
      if (!swivel(angle)) {
        // The largest part of the swivel the limits allow.
        double lo = 0.0, hi = 1.0;
        for (int i = 0; i < 30; ++i) {
          const double t = 0.5 * (lo + hi);
          (swivel(t * angle) ? lo : hi) = t;
        }
        swivel(lo * angle);
      }
      pose_.local[lr].rotation = root_local;
      pose_.local[mid].rotation = middle_local;
      ForwardKinematics();
      swung = true;
      turned = true;
    }
    if (!swung) {
      // The limb rolls about the line (a hinge in it bends in its own
      // plane; so does a hinge root); a limited root takes the part of
      // the turn its limits allow.
      double turn = angle;
      if (joint.IsConstrained()) {
        turn = NearestFeasibleTurn(joint, parent, s_.globals[lr].rotation,
                                   line, angle, std::min(angle, 0.0),
                                   std::max(angle, 0.0));
        if (!std::isfinite(turn)) continue;
      }
      pose_.local[lr].rotation =
          (parent.conjugate() *
           (AxisAngle(line, turn) * s_.globals[lr].rotation))
              .normalized();
      if (joint.IsConstrained()) {
        pose_.local[lr].rotation =
            ConstrainRotation(joint, pose_.local[lr].rotation).normalized();
      }
      ForwardKinematics();
      turned = true;
    }
    if (goal.target_orientation && s_.dof_start[e] >= 0) {
      const Joint& tip = skeleton_.joint(e);
      pose_.local[e].rotation =
          ConstrainRotation(tip, (s_.globals[tip.parent].rotation.conjugate() *
                                  effector_rotation)
                                     .normalized())
              .normalized();
      ForwardKinematics();
    }
  }
  return turned;
}

double FullBodySolve::MaxFraction() const {
  // The largest fraction of s_.delta that keeps every joint's rotation
  // (and the root's translation) in step + fraction * delta within its
  // per-iteration cap: the root of |a + x b|^2 = cap^2 per joint.
  const auto a = s_.step.head(cols_);
  const auto b = s_.delta.head(cols_);
  // No joint near its cap (|a + b| <= sqrt(3) max|a + b| for a ball's three
  // columns): all of delta, as the per-joint fit below would find.
  if (std::sqrt(3.0) * (a + b).lpNorm<Eigen::Infinity>() <=
      std::min(kMaxJointStep, kMaxRootStep)) {
    return 1.0;
  }
  double fraction = 1.0;
  auto fit = [&](int col, int count, double cap) {
    const double bb = b.segment(col, count).squaredNorm();
    if (!(bb > 0.0)) return;
    if ((a.segment(col, count) + b.segment(col, count)).norm() <= cap) return;
    const double ab = a.segment(col, count).dot(b.segment(col, count));
    const double cc =
        std::min(0.0, a.segment(col, count).squaredNorm() - cap * cap);
    const double x = (-ab + std::sqrt(std::max(0.0, ab * ab - bb * cc))) / bb;
    fraction = std::min(fraction, std::max(0.0, x));
  };
  int col = 0;
  if (translates_) {
    fit(0, 3, kMaxRootStep);
    col = 3;
  }
  while (col < cols_) {
    const int count =
        skeleton_.joint(s_.dof_joint[col]).type == JointType::kBall ? 3 : 1;
    fit(col, count, kMaxJointStep);
    col += count;
  }
  return fraction;
}

void FullBodySolve::Factor(double damping) {
  if (!jacobian_current_) {
    FillJacobian();
    jacobian_current_ = true;
  }
  // Columns weighted by sqrt(1 - stiffness) (0 when locked): the step
  // minimises sum(dq^2 / (1 - stiffness)). The weights enter as their
  // squares, per column, in J W^2 J^T and W^2 J^T c (no weighted copy of
  // the Jacobian).
  for (int c = 0; c < cols_; ++c) {
    s_.scale[c] = s_.locked[c] ? 0.0 : s_.dof_weight[c] * s_.dof_weight[c];
  }
  const Eigen::MatrixXd& J = s_.jacobian;
  factored_jacobian_ = J.data();
  factored_stride_ = J.rows();
  const double* scale = s_.scale.data();
  auto G = s_.gram.topLeftCorner(rows_, rows_);
  // G = J W^2 J^T, block by block over the columns two goals share: each
  // shared column adds the outer product of the two goals' rows in it
  // (contiguous in the column-major J), so the block's sums run side by
  // side instead of one after another.
  const int goals = static_cast<int>(s_.goal_order.size());
  int pair = 0;
  for (int a = 0; a < goals; ++a) {
    const int ra = s_.goal_row[a], na = s_.goal_row[a + 1] - ra;
    for (int b = a; b < goals; ++b, ++pair) {
      const int rb = s_.goal_row[b], nb = s_.goal_row[b + 1] - rb;
      double block[kMaxGoalRows][kMaxGoalRows];
      const int* cols = s_.pair_cols.data() + s_.pair_col_start[pair];
      const int count = s_.pair_col_start[pair + 1] - s_.pair_col_start[pair];
      switch (na) {
        case 2: GramBlockB<2>(J, scale, ra, rb, nb, cols, count, block); break;
        case 3: GramBlockB<3>(J, scale, ra, rb, nb, cols, count, block); break;
        default:
          GramBlockB<6>(J, scale, ra, rb, nb, cols, count, block);
          break;
      }
      for (int i = 0; i < nb; ++i) {
        for (int k = 0; k < na; ++k) {
          G(rb + i, ra + k) = block[i][k];
          G(ra + k, rb + i) = block[i][k];
        }
      }
    }
  }

  // One Cholesky factor L of G + mu I serves every level: for a level's
  // rows k below the rows a above it, L_ka^T = L_a^-1 G_ak, so
  // X^T = (G_aa + mu)^-1 G_ak = L_a^-T L_ka^T, and the projected level's
  // Gram matrix G_kk - G_ka X^T = L_kk L_kk^T - mu.
  Eigen::MatrixXd& L = s_.cross;
  for (int col = 0; col < rows_; ++col) {
    for (int row = col; row < rows_; ++row) L(row, col) = G(row, col);
    L(col, col) += kProjectionRegulariser;
  }
  // Each level's projected Gram matrix H = L_kk L_kk^T + (lambda^2 - mu) I
  // (L_kk L_kk^T is the level's Schur complement, which the factorisation
  // passes through), factored in the diagonal block of s_.small at its
  // rows.
  Eigen::MatrixXd& H = s_.small;
  CholeskyWithSchur(L.data(), L.rows(), rows_, kProjectionRegulariser,
                    level_start_.data(), active_levels_, H.data(), H.rows());
  const double lambda2 = damping * damping;
  for (int level = 0; level < active_levels_; ++level) {
    const int s = level_start_[level];
    const int m = level_start_[level + 1] - s;
    for (int a = 0; a < m; ++a) {
      H(s + a, s + a) += lambda2 - kProjectionRegulariser;
    }
    CholeskyInPlace(&H(s, s), H.rows(), m, 1e-300);
  }
}

void FullBodySolve::SolveLevels() {
  // Every level's step is J^T c for coefficients c: it lies in the span
  // of its rows projected away from the levels above (Siciliano-Slotine),
  // so only Gram-sized matrices are formed. Each level's share is scaled
  // to the per-iteration caps on its own, so a far goal of a later level
  // never slows an earlier one.
  // The Jacobian the factorisation was made with (a chord step's pose
  // has the other buffer).
  const double* J = factored_jacobian_;
  const Eigen::Index stride = factored_stride_;
  const auto G = s_.gram.topLeftCorner(rows_, rows_);
  const Eigen::MatrixXd& L = s_.cross;
  const Eigen::MatrixXd& H = s_.small;
  const int goals = static_cast<int>(s_.goal_order.size());
  auto c = s_.coeffs.head(rows_);
  auto dc = s_.delta_coeffs.head(rows_);
  auto step = s_.step.head(cols_);
  auto delta = s_.delta.head(cols_);
  c.setZero();
  step.setZero();
  for (int level = 0; level < active_levels_; ++level) {
    const int s = level_start_[level];
    const int m = level_start_[level + 1] - s;
    auto r = s_.rhs.head(m);
    r = s_.error.segment(s, m);
    // What the levels before took of this one's rows (c is zero from row s
    // on: each level's coefficients lie in its rows and those above).
    if (s > 0) r.noalias() -= G.block(s, 0, m, s) * c.head(s);
    CholeskySolveInPlace(&H(s, s), H.rows(), m, r.data());
    dc.setZero();
    dc.segment(s, m) = r;
    if (s > 0) {
      // dc_a = -X^T z = -L_a^-T (L_ka^T z).
      for (int t = 0; t < s; ++t) {
        double sum = 0.0;
        for (int a = 0; a < m; ++a) sum += L(s + a, t) * r(a);
        dc(t) = -sum;
      }
      for (int t = s - 1; t >= 0; --t) {
        double value = dc(t);
        for (int u = t + 1; u < s; ++u) value -= L(u, t) * dc(u);
        dc(t) = value / L(t, t);
      }
    }
    // delta = W^2 J^T dc, over each goal's own columns.
    delta.setZero();
    for (int k = 0; k < goals && s_.goal_row[k] < s + m; ++k) {
      const int row = s_.goal_row[k];
      const int* cols = s_.goal_cols.data() + s_.goal_col_start[k];
      const int count = s_.goal_col_start[k + 1] - s_.goal_col_start[k];
      switch (s_.goal_row[k + 1] - row) {
        case 2: AddTransposed<2>(J, stride, row, cols, count, dc, delta); break;
        case 3: AddTransposed<3>(J, stride, row, cols, count, dc, delta); break;
        default:
          AddTransposed<6>(J, stride, row, cols, count, dc, delta);
          break;
      }
    }
    for (int col = 0; col < cols_; ++col) delta(col) *= s_.scale[col];
    const double fraction = MaxFraction();
    c += fraction * dc;
    step += fraction * delta;
  }
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
    const int count = DofCount(j);
    if (joint.type == JointType::kBall) {
      const Vector3d turn = step(col) * s_.axis[col] +
                            step(col + 1) * s_.axis[col + 1] +
                            step(col + 2) * s_.axis[col + 2];
      const Quaterniond& parent =
          j == root_ ? root_parent_.rotation
                     : s_.globals[joint.parent].rotation;
      local = TurnedLocal(parent, turn, local);
    } else {
      local = (local * AxisAngle(joint.axis, step(col))).normalized();
    }
    if (joint.IsConstrained() && !InsideBallLimits(j, local)) {
      // Hold the column(s) that crossed a limit by more than kClampedBy: a
      // hinge's; a ball's twist column past its twist range, its swing
      // column past its cone.
      LimitExcess excess;
      local = ConstrainRotation(joint, local, &excess).normalized();
      auto lock = [&](int c) {
        if (!s_.locked[c]) clamped = true;
        s_.locked[c] = 1;
      };
      if (joint.type == JointType::kHinge) {
        if (std::max(excess.twist, excess.swing) > kClampedBy) lock(col);
      } else {
        if (excess.twist > kClampedBy) lock(col);
        if (excess.swing > kClampedBy) lock(col + 1);
      }
    }
    col += count;
  }
  return clamped;
}

void FullBodySolve::Unstraighten() {
  // A straight knee or elbow is a singular point of every goal: no first-
  // order motion of its joints shortens the limb, so no Jacobian step ever
  // bends it (a crouch with straight legs would never lower the pelvis).
  // Like UE's preferred angles, such a joint starts bent a little: a hinge
  // into its range (towards the middle of a two-sided range, else to
  // positive angles), the middle joint of a ball limb with a pole towards
  // the pole.
  constexpr double kStraight = 1e-3;  // Radians between the two bones.
  constexpr double kBend = 0.1;
  ForwardKinematics();
  const int m = static_cast<int>(s_.goal_order.size());
  for (int k = 0; k < m; ++k) {
    const Goal& goal = goals_[s_.goal_order[k]];
    const int e = s_.effector[k];
    for (int c = e, j = skeleton_.joint(e).parent; j >= 0 && j != root_;
         c = j, j = skeleton_.joint(j).parent) {
      const Joint& joint = skeleton_.joint(j);
      if (joint.type != JointType::kHinge || s_.dof_start[j] < 0) continue;
      const Vector3d upper =
          s_.globals[j].translation - s_.globals[joint.parent].translation;
      const Vector3d lower = s_.globals[c].translation - s_.globals[j].translation;
      if (!(std::atan2(upper.cross(lower).norm(), upper.dot(lower)) <
            kStraight)) {
        continue;
      }
      const double angle = HingeAngleWithinLimits(joint, pose_.local[j].rotation);
      double sign = 1.0;
      if (std::isfinite(joint.min_angle_rad) &&
          std::isfinite(joint.max_angle_rad)) {
        sign = 0.5 * (joint.min_angle_rad + joint.max_angle_rad) >= angle ? 1.0
                                                                         : -1.0;
      } else if (std::isfinite(joint.max_angle_rad)) {
        sign = -1.0;
      }
      pose_.local[j].rotation =
          ConstrainRotation(joint, HingeRotation(joint, angle + sign * kBend))
              .normalized();
      ForwardKinematics();
    }
    if (!goal.pole) continue;
    // The inner joint nearest the middle of a pole limb.
    const int lr = LimbRootOf(skeleton_, goal);
    if (!s_.active[lr]) continue;
    const int mid = MiddleJoint(e, lr);
    const Joint& joint = skeleton_.joint(mid);
    if (joint.type != JointType::kBall || s_.dof_start[mid] < 0) continue;
    const Vector3d origin = s_.globals[lr].translation;
    const Vector3d line = s_.globals[e].translation - origin;
    const Vector3d off = s_.globals[mid].translation - origin;
    if (!(line.norm() > 0.0) ||
        !(off.cross(line).norm() < kStraight * off.norm() * line.norm())) {
      continue;
    }
    const Vector3d to_pole = *goal.pole - origin;
    const Vector3d axis = to_pole.cross(line);
    if (!(axis.norm() > 1e-12 * to_pole.norm() * line.norm())) continue;
    pose_.local[mid].rotation =
        ConstrainRotation(joint, TurnedLocal(s_.globals[joint.parent].rotation,
                                             kBend * axis.normalized(),
                                             pose_.local[mid].rotation))
            .normalized();
    ForwardKinematics();
  }
}

bool FullBodySolve::DemoteOutOfReach() {
  const int m = static_cast<int>(s_.goal_order.size());
  if (m < 2) return false;
  // Each goal's reach from the root (its bones' lengths), in
  // saved_goal_excess (free until a step saves the evaluation).
  const std::vector<double>& depth = skeleton_.body_model().reach;
  std::vector<double>& reach = s_.saved_goal_excess;
  for (int k = 0; k < m; ++k) reach[k] = depth[s_.effector[k]] - depth[root_];
  bool any = false;
  for (int a = 0; a < m; ++a) {
    const Goal& ga = goals_[s_.goal_order[a]];
    if (ga.aim_axis || s_.demoted[s_.goal_order[a]]) continue;
    for (int b = a + 1; b < m; ++b) {
      const Goal& gb = goals_[s_.goal_order[b]];
      if (gb.aim_axis || s_.demoted[s_.goal_order[b]]) continue;
      if (!((ga.target - gb.target).norm() >
            reach[a] + reach[b] + s_.tolerance[s_.goal_order[a]] +
                s_.tolerance[s_.goal_order[b]])) {
        continue;
      }
      // Sorted by priority: a's is at most b's. Within a level, the one
      // that asked for more at the start (as OnStall decides).
      int later = b;
      if (ga.priority == gb.priority &&
          s_.start_excess[s_.goal_order[a]] >
              s_.start_excess[s_.goal_order[b]]) {
        later = a;
      }
      if (s_.soft[s_.goal_order[later]]) continue;
      s_.demoted[s_.goal_order[later]] = 1;
      any = true;
      if (later == a) break;
    }
  }
  if (any) {
    Arrange();
    PairColumns();
  }
  return any;
}

void FullBodySolve::SaveLocals(std::vector<Transform>& to) const {
  for (int j : s_.active_joints) to[j] = pose_.local[j];
}
void FullBodySolve::RestoreLocals(const std::vector<Transform>& from) {
  for (int j : s_.active_joints) pose_.local[j] = from[j];
}

bool FullBodySolve::Better(const Levels& a, const Levels& b) const {
  // The protected levels compare strictly in order: a step never costs
  // them anything.
  int level = 0;
  for (; level < protected_levels_ && level < active_levels_; ++level) {
    if (a[level] > b[level] * (1.0 + 1e-12)) return false;
    if (a[level] < b[level] * (1.0 - 1e-12)) return true;
  }
  // Then a merit that weighs each priority's squared excess 100 times the
  // next one's: a step may cost an earlier level a little while a later
  // one gains much more (the nonlinearity of a long step); the next step,
  // solved for the earlier level first, gives it back.
  return Merit(a, level) < Merit(b, level) * (1.0 - 1e-12);
}

double FullBodySolve::Merit(const Levels& excess, int level) const {
  double merit = 0.0;
  for (; level < active_levels_; ++level) {
    merit += level_weight_[level] * excess[level];
  }
  return merit;
}

bool FullBodySolve::OnStall(const Levels& excess) {
  if (restoring_ >= 0) {
    // The restored level got as close as it can: every level again, that
    // one and those before it protected.
    protected_levels_ = std::max(protected_levels_, restoring_ + 1);
    restoring_ = -1;
    active_levels_ = num_levels_;
    return true;
  }
  const int m = static_cast<int>(s_.goal_order.size());
  for (int level = 0; level < num_levels_; ++level) {
    if (!(excess[level] > 0.0)) continue;
    // A level of several goals: within a level goals share their errors,
    // so one that cannot be reached with the others (a foot far below the
    // floor) drags them (the planted foot) along. The goal that asked for
    // the most (the largest weighted excess at the start, then now) is
    // demoted: solved after the rest of its level, in their null space.
    // Goals already at their targets stay there, as a stream's answer
    // stays near the last.
    int begin = 0;
    while (s_.goal_row[begin] < level_start_[level]) ++begin;
    // The body model's own goals come last and never change the problem.
    if (s_.soft[s_.goal_order[begin]]) break;
    int end = begin;
    while (end < m && s_.goal_row[end] < level_start_[level + 1]) ++end;
    if (end - begin >= 2 && !s_.demoted[s_.goal_order[begin]]) {
      auto asked = [&](int k) {
        return std::make_pair(s_.start_excess[s_.goal_order[k]],
                              s_.goal_excess[k]);
      };
      int worst = begin;
      for (int k = begin + 1; k < end; ++k) {
        if (asked(k) > asked(worst)) worst = k;
      }
      s_.demoted[s_.goal_order[worst]] = 1;
      const int levels_before = num_levels_;
      Arrange();
      PairColumns();
      // A new sub-level after this one shifts the protected ones.
      if (num_levels_ > levels_before && protected_levels_ > level) {
        ++protected_levels_;
      }
      return true;
    }
    // A level a later one keeps from its target (the second-order effect
    // of the later levels' steps): solve it alone until it gets there or
    // stalls, then keep it where it is. Once protected, a level that is
    // still unreached cannot be helped: look at the next.
    if (level + 1 < num_levels_ && protected_levels_ <= level) {
      restoring_ = level;
      restored_steps_ = 0;
      active_levels_ = level + 1;
      return true;
    }
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
  // Both leave the model-space transforms current.
  Unstraighten();
  if (num_poles_ > 0) ApplyPoles();
  // Levenberg-Marquardt on the prioritised step: a step that leaves the
  // goals worse (levels compared in priority order) is undone and the
  // damping raised; one that helps is kept and the damping lowered.
  double damping = kDamping;
  bool reached = Evaluate();
  for (size_t k = 0; k < s_.goal_order.size(); ++k) {
    s_.start_excess[s_.goal_order[k]] = s_.goal_excess[k];
  }
  if (DemoteOutOfReach()) reached = Evaluate();
  Levels current = level_excess_;
  int iterations = 0;
  int pole_rounds = num_poles_ > 0 ? 2 : 0;
  // The merit and iteration at the last stall check (or restart).
  double check_merit = Merit(current);
  int check_iteration = 0;
  // Whether the last full step's factorisation (Factor) can serve a chord
  // step (the problem and locks it was made with still hold, and it has
  // not served one yet), and whether the last step was short and
  // converging fast.
  bool factored = false;
  bool chord_ok = false;
  // After a stall changed the problem: the goals' rows again.
  auto restart = [&] {
    factored = false;
    reached = Evaluate();
    current = level_excess_;
    damping = kDamping;
    check_merit = Merit(current);
    check_iteration = iterations;
  };
  for (;;) {
    if (reached && pole_rounds > 0) {
      // Converged: face the poles, and converge again if that cost a goal
      // (an orientation the limits would not turn back).
      --pole_rounds;
      if (ApplyPoles()) {
        factored = false;
        reached = Evaluate();
        current = level_excess_;
        damping = kDamping;
      } else {
        pole_rounds = 0;  // Every bend faces its pole: nothing changed.
      }
    }
    if (reached || iterations >= max_iterations) break;
    if (iterations % 4 == 3 && deadline.Expired()) break;
    ++iterations;
    SaveLocals(s_.saved_locals);
    // After a short step, the factorisation it was solved with serves this
    // pose's errors too (a chord step: the Jacobian barely changed), unless
    // a joint reaches a new limit.
    bool full = !(factored && chord_ok);
    if (!full) {
      factored = false;
      SolveLevels();
      if (ApplyStep()) {
        RestoreLocals(s_.saved_locals);
        full = true;
      }
    }
    if (full) {
      std::fill(s_.locked.begin(), s_.locked.end(), 0);
      ComputeStep(damping);
      factored = true;
      if (ApplyStep()) {
        // Joints hit their limits: the step again without them, so the
        // others take up the motion (the transforms are still the
        // start's). Should that step lock more, the factorisation no
        // longer matches the locks: no chord step from it.
        RestoreLocals(s_.saved_locals);
        ComputeStep(damping);
        factored = !ApplyStep();
      }
    }
    const double moved = s_.step.head(cols_).lpNorm<Eigen::Infinity>();
    ForwardKinematics();
    SaveEvaluation();
    bool now_reached = Evaluate();
    if (!now_reached && protected_levels_ > 0 && restoring_ < 0 &&
        !Better(level_excess_, current) &&
        Merit(level_excess_, protected_levels_) <
            Merit(current, protected_levels_)) {
      // The later levels gained and a protected level lost: the curvature
      // of its goals along a step in their null space. One step for it
      // and the levels before it alone, from here, takes it back.
      int lost = 0;
      while (lost < protected_levels_ && !(level_excess_[lost] > current[lost])) {
        ++lost;
      }
      if (lost < protected_levels_) {
        const int active = active_levels_;
        active_levels_ = lost + 1;
        std::fill(s_.locked.begin(), s_.locked.end(), 0);
        ComputeStep(kDamping);
        factored = false;
        ApplyStep();
        active_levels_ = active;
        ForwardKinematics();
        now_reached = Evaluate();
      }
    }
    if (now_reached || Better(level_excess_, current) ||
        (restoring_ >= 0 && Merit(level_excess_) == 0.0)) {
      chord_ok = moved < kChordStep &&
                 Merit(level_excess_) < kChordProgress * Merit(current);
      current = level_excess_;
      reached = now_reached;
      damping = std::max(kMinDamping, 0.5 * damping);
      if (restoring_ >= 0 && current[restoring_] == 0.0 &&
          ++restored_steps_ > 2) {
        // Restored, and two more steps taken it well inside its
        // tolerance (a later level's next steps may move it a little):
        // every level again.
        OnStall(current);
        restart();
        continue;
      }
    } else {
      RestoreLocals(s_.saved_locals);
      ForwardKinematics();
      RestoreEvaluation();
      factored = false;
      // A chord step that did not help says the factorisation is stale,
      // not that the damping is too low: a full step next.
      if (!full) continue;
      damping *= 4.0;
      if (damping > kMaxDamping) {
        if (!focus_ && NearlyReached()) {
          // No step helps, with the goals outside their tolerances just
          // outside: a step for every goal's whole error, most of it the
          // goals already reached closing in on their targets, can cost a
          // goal outside its last hair (a 54-joint rig's pelvis point
          // ended at 1.004 times its tolerance after 27 iterations). From
          // here the reached goals hold still and the steps serve the
          // others.
          focus_ = true;
          restart();
          continue;
        }
        // No step helps: converged, unless the problem can change.
        if (!OnStall(current)) break;
        restart();
        continue;
      }
    }
    if (moved < 1e-12) {
      // Nothing moves (the goals' joints held at their limits): converged,
      // unless the problem can change (a restoration ends).
      if (!OnStall(current)) break;
      restart();
      continue;
    }
    if (iterations - check_iteration >= kStallWindow) {
      const double merit = Merit(current);
      if (merit > kStallProgress * check_merit && OnStall(current)) {
        restart();
      } else {
        check_merit = merit;
        check_iteration = iterations;
      }
    }
  }
  reached_ = reached;
  return std::max(iterations, 1);
}

void FullBodySolve::ExcessByGoal(std::vector<double>& to) {
  ForwardKinematics();
  Evaluate();
  to.assign(goals_.size(), 0.0);
  for (size_t k = 0; k < s_.goal_order.size(); ++k) {
    to[s_.goal_order[k]] = s_.goal_excess[k];
  }
}

bool FullBodySolve::BendRestingHinges(const std::vector<Transform>& start) {
  pose_.local = start;
  ForwardKinematics();
  // Only for an unreached goal (s_.goal_excess is the answer's, from
  // ExcessByGoal), not a look-at, within 1.25 times its path's length of
  // the root where the start pose has it: a target further out is out of
  // reach of the limbs alone (the root may still move toward it, but the
  // first attempt has already moved it as far as the goals let it).
  const Vector3d root = s_.globals[root_].translation;
  bool within_reach = false;
  for (size_t k = 0; k < s_.goal_order.size() && !within_reach; ++k) {
    const Goal& goal = goals_[s_.goal_order[k]];
    if (!(s_.goal_excess[k] > 0.0) || goal.aim_axis) continue;
    double length = 0.0;
    for (int j = s_.effector[k]; j != root_; j = skeleton_.joint(j).parent) {
      length += (s_.globals[j].translation -
                 s_.globals[skeleton_.joint(j).parent].translation)
                    .norm();
    }
    within_reach = (goal.target - root).norm() <= 1.25 * length;
  }
  if (!within_reach) return false;
  // Every limb's, not only that goal's: another limb's straight hinge
  // pulls the body into the same corner (bending them all solved 98.0% of
  // the peer benchmark's full-range poses from rest, the unreached goals'
  // paths alone 95.0%).
  bool any = false;
  for (int j : s_.active_joints) {
    const Joint& joint = skeleton_.joint(j);
    if (joint.type == JointType::kHinge && s_.dof_start[j] >= 0 &&
        std::isfinite(joint.min_angle_rad) &&
        std::isfinite(joint.max_angle_rad)) {
      pose_.local[j].rotation = HingeRotation(
          joint, 0.5 * (joint.min_angle_rad + joint.max_angle_rad));
      any = true;
    }
  }
  return any;
}

// Whether every joint below a root is at its rest rotation in `locals`
// (a new character, wherever its roots are), to about 3e-6 rad.
bool AtRest(const Skeleton& skeleton, const std::vector<Transform>& locals) {
  for (int j = 0; j < skeleton.num_joints(); ++j) {
    if (skeleton.joint(j).parent >= 0 &&
        !(std::abs(locals[j].rotation.dot(skeleton.joint(j).rest.rotation)) >=
          1.0 - 1e-12)) {
      return false;
    }
  }
  return true;
}

// Whether `b` (each goal's excess, by goal of the request) is better than
// `a`: the lowest priority whose goals differ decides, by how many of them
// are unreached, then by their summed excess (by more than 1e-6 of it, so
// that rounding, or the order the sums run in, never decides); NaN is
// worse than anything.
bool BetterByPriority(absl::Span<const Goal> goals,
                      const std::vector<double>& a,
                      const std::vector<double>& b) {
  int last = std::numeric_limits<int>::min();
  for (;;) {
    int next = std::numeric_limits<int>::max();
    bool found = false;
    for (size_t i = 0; i < goals.size(); ++i) {
      if (IsFullBody(goals[i]) && goals[i].priority > last &&
          goals[i].priority <= next) {
        next = goals[i].priority;
        found = true;
      }
    }
    if (!found) return false;
    int ua = 0, ub = 0;
    double sa = 0.0, sb = 0.0;
    for (size_t i = 0; i < goals.size(); ++i) {
      if (!IsFullBody(goals[i]) || goals[i].priority != next) continue;
      ua += !(a[i] == 0.0);
      ub += !(b[i] == 0.0);
      sa += a[i];
      sb += b[i];
    }
    if (ub != ua) return ub < ua;
    if (std::isnan(sa) || std::isnan(sb)) {
      return std::isnan(sa) && !std::isnan(sb);
    }
    if (sb < sa * (1.0 - 1e-6)) return true;
    if (sb > sa * (1.0 + 1e-6)) return false;
    last = next;
  }
}

}  // namespace

int SolveFullBody(const Skeleton& skeleton, absl::Span<const Goal> request,
                  const FullBodyOptions& options, const Deadline& deadline,
                  FullBodyScratch& scratch, Pose* pose,
                  absl::Span<GoalResult> request_results) {
  const Deadline budget = deadline.WithBudget(options.time_budget_ms);
  const int max_iterations =
      options.max_iterations > 0 ? options.max_iterations : kDefaultIterations;
  int iterations = 0;
  // The body model (BodyMode::kHuman on a humanoid): the request's goals
  // with preferred bends, then the pelvis' goals (AddBodyGoals), solved in
  // place of the request's.
  const BodyModel& body = skeleton.body_model();
  const BodyModel* model =
      options.body == BodyMode::kHuman && body.human ? &body : nullptr;
  absl::Span<const Goal> goals = request;
  absl::Span<GoalResult> results = request_results;
  scratch.soft.assign(request.size(), 0);
  scratch.pole_cone.assign(request.size(), 0.0);
  if (model != nullptr) {
    scratch.body_goals.assign(request.begin(), request.end());
    if (options.root_joint < 0 && options.root_mode != RootMode::kPinned) {
      AddBodyGoals(skeleton, body, options.plant_feet, scratch.globals,
                   scratch.body_known, scratch.body_goals, scratch.soft,
                   scratch.pole_cone, pose);
    }
    scratch.body_results.resize(scratch.body_goals.size());
    goals = scratch.body_goals;
    results = absl::MakeSpan(scratch.body_results);
  }
  {
    // A new character (every joint below a root at rest; a stream's frame
    // almost never is, and the check stops at its first joint off rest).
    const bool from_rest = AtRest(skeleton, pose->local);
    if (from_rest) scratch.start_locals = pose->local;
    FullBodySolve solve(skeleton, goals, options, scratch, pose, model);
    if (solve.Setup(results)) {
      iterations = solve.Run(budget, max_iterations);
      // A new character's straight limbs can settle into bends no step
      // leaves (a knee at its range's end with the foot far off): when a
      // solve from the rest pose leaves a goal within reach unreached, a
      // second attempt starts from it with every resting hinge (knees,
      // elbows) bent to the middle of its range, and the better answer
      // stays (priorities compared in order). On the DART peer benchmark's
      // full-range poses of the limited humanoid this took the solves from
      // rest that reach every goal from 86.5% to 98.0%. Any other start
      // (a stream's frames) never makes one.
      if (from_rest && !solve.Reached() && !budget.Expired()) {
        solve.ExcessByGoal(scratch.first_excess);
        scratch.first_locals = pose->local;
        if (!solve.BendRestingHinges(scratch.start_locals)) {
          pose->local = scratch.first_locals;
        } else {
          FullBodySolve again(skeleton, goals, options, scratch, pose, model);
          bool better = false;
          if (again.Setup(results)) {
            iterations += again.Run(budget, max_iterations);
            again.ExcessByGoal(scratch.second_excess);
            better = BetterByPriority(goals, scratch.first_excess,
                                      scratch.second_excess);
          }
          if (!better) pose->local = scratch.first_locals;
        }
      }
    }
  }
  if (model != nullptr) {
    for (size_t i = 0; i < request.size(); ++i) {
      if (IsFullBody(request[i])) request_results[i] = scratch.body_results[i];
    }
  }
  for (size_t i = 0; i < request.size(); ++i) {
    if (IsFullBody(request[i])) request_results[i].iterations = iterations;
  }
  return iterations;
}

}  // namespace reach
