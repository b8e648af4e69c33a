// FullBodySolve (problem.h): the prioritised damped least-squares step
// (the Gram matrices J W^2 J^T, their factors, each level's solve in the
// null space of the levels before it) and applying it within the limits.

#include <algorithm>
#include <cmath>

#include "solvers/full_body/cholesky.h"
#include "solvers/full_body/problem.h"

namespace reach {
namespace full_body_internal {
namespace {

// Regularises the Gram matrix of the levels above when projecting a level
// into their null space (rank-deficient stacks: a foot's position and
// orientation at a locked ankle).
constexpr double kProjectionRegulariser = 1e-9;
// Largest rotation of one joint, and translation of the root (in body
// sizes), in one iteration: the step is scaled down as a whole to fit.
// (Measured from rest on solver_bench's gameplay poses, whose feet turn by
// up to ~1.5 rad: 0.35 -> 0.6 takes 5.69 -> 5.19 iterations, 0.8 and 1.0
// no fewer; the CMU streams' steps in docs/benchmarks.md.)
constexpr double kMaxJointStep = 0.6;
constexpr double kMaxRootStep = 0.2;
// A joint projected back onto its limits by more than this (radians) is
// held at the limit for the rest of the iteration's step (and for a chord
// step after it, which reuses that step's factorisation).
constexpr double kClampedBy = 1e-7;

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
    case 2:
      return GramBlock<Na, 2>(J, scale, ra, rb, cols, count, block);
    case 3:
      return GramBlock<Na, 3>(J, scale, ra, rb, cols, count, block);
    default:
      return GramBlock<Na, 6>(J, scale, ra, rb, cols, count, block);
  }
}

// delta(col) += J(row.., col) . dc(row..) over one goal's N rows, for each
// of its columns (the sum in row order, unrolled by the fixed size); J is
// column-major, its columns `stride` apart.
template <int N, typename Coeffs, typename Delta>
void AddTransposed(const double* J, Eigen::Index stride, int row,
                   const int* cols, int count, const Coeffs& dc, Delta& delta) {
  double d[N];
  for (int r = 0; r < N; ++r) d[r] = dc(row + r);
  for (int p = 0; p < count; ++p) {
    const double* j = J + row + cols[p] * stride;
    double sum = 0.0;
    for (int r = 0; r < N; ++r) sum += j[r] * d[r];
    delta(cols[p]) += sum;
  }
}

// y(row..) += J(row.., col) d over one goal's N rows, for each of its
// columns whose d = delta(col) is not zero, in column order (unrolled by
// the fixed size); returns whether any was.
template <int N, typename Delta, typename Rows>
bool AddColumns(const double* J, Eigen::Index stride, int row,
                const int* cols, int count, const Delta& delta, Rows& y) {
  double sum[N];
  for (int r = 0; r < N; ++r) sum[r] = y(row + r);
  bool any = false;
  for (int p = 0; p < count; ++p) {
    const double d = delta(cols[p]);
    if (d == 0.0) continue;
    any = true;
    const double* j = J + row + cols[p] * stride;
    for (int r = 0; r < N; ++r) sum[r] += j[r] * d;
  }
  for (int r = 0; r < N; ++r) y(row + r) = sum[r];
  return any;
}

}  // namespace

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
        1.0 + t * (-1.0 / 8 +
                   t * (1.0 / 384 +
                        t * (-1.0 / 46080 +
                             t * (1.0 / 10321920 + t * (-1.0 / 3715891200)))));
    const double s =
        0.5 + t * (-1.0 / 48 +
                   t * (1.0 / 3840 +
                        t * (-1.0 / 645120 + t * (1.0 / 185794560 +
                                                  t * (-1.0 / 81749606400)))));
    exp = Quaterniond(w, s * v.x(), s * v.y(), s * v.z());
  } else {
    exp = FromRotationVector(v);
  }
  return (exp * local).normalized();
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
  // The same Jacobian factored again with other locks (a step retaken
  // without the joints it clamped: a hinge held straight, a limit): only
  // the Gram blocks of the goal pairs that share a column whose weight
  // changed are summed again, and the factors only from the first level
  // those blocks' rows fall in. Everything else is what a whole Factor
  // would make, operation for operation (bit for bit the same answers).
  const bool again = jacobian_current_ && factor_current_ &&
                     factored_jacobian_ == s_.jacobian.data() &&
                     damping == factored_damping_ &&
                     active_levels_ == factored_levels_;
  if (!jacobian_current_) {
    FillJacobian();
    jacobian_current_ = true;
  }
  // The last factorisation's column weights, for `again` (s_.rhs is
  // SolveLevels' and PostureDelta's scratch, free here).
  double* const old_scale = s_.rhs.data();
  if (again) std::copy_n(s_.scale.data(), cols_, old_scale);
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
  int first_row = rows_;  // Again: the first row of a block summed again.
  for (int a = 0; a < goals; ++a) {
    const int ra = s_.goal_row[a], na = s_.goal_row[a + 1] - ra;
    for (int b = a; b < goals; ++b, ++pair) {
      const int rb = s_.goal_row[b], nb = s_.goal_row[b + 1] - rb;
      double block[kMaxGoalRows][kMaxGoalRows];
      const int* cols = s_.pair_cols.data() + s_.pair_col_start[pair];
      const int count = s_.pair_col_start[pair + 1] - s_.pair_col_start[pair];
      if (again) {
        int p = 0;
        while (p < count && s_.scale[cols[p]] == old_scale[cols[p]]) ++p;
        if (p == count) continue;
        first_row = std::min(first_row, ra);
      }
      switch (na) {
        case 2:
          GramBlockB<2>(J, scale, ra, rb, nb, cols, count, block);
          break;
        case 3:
          GramBlockB<3>(J, scale, ra, rb, nb, cols, count, block);
          break;
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
  // Again, the factors' columns before the level of the first block
  // summed again stand (G's entries there and left of them are as they
  // were), and so do the levels' factors before it.
  int first_level = 0;
  if (again) {
    if (first_row == rows_) return;  // No weight the Gram matrix uses moved.
    while (level_start_[first_level + 1] <= first_row) ++first_level;
  }
  const int first = level_start_[first_level];
  Eigen::MatrixXd& L = s_.cross;
  for (int col = first; col < rows_; ++col) {
    for (int row = col; row < rows_; ++row) L(row, col) = G(row, col);
    L(col, col) += kProjectionRegulariser;
  }
  // Each level's projected Gram matrix H = L_kk L_kk^T + (lambda^2 - mu) I
  // (L_kk L_kk^T is the level's Schur complement, which the factorisation
  // passes through), factored in the diagonal block of s_.small at its
  // rows.
  Eigen::MatrixXd& H = s_.small;
  CholeskyWithSchur(L.data(), L.rows(), rows_, kProjectionRegulariser,
                    level_start_.data(), active_levels_, H.data(), H.rows(),
                    first);
  factor_current_ = true;
  factored_damping_ = damping;
  factored_levels_ = active_levels_;
  const double lambda2 = damping * damping;
  for (int level = first_level; level < active_levels_; ++level) {
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
        case 2:
          AddTransposed<2>(J, stride, row, cols, count, dc, delta);
          break;
        case 3:
          AddTransposed<3>(J, stride, row, cols, count, dc, delta);
          break;
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
  Relax();
}

void FullBodySolve::Relax() {
  if (!relax_pending_ || !posture_ || !places_body_ || model_->relax.empty()) {
    return;
  }
  // A warm solve (a stream's next frame, or a caller's pose) holds the
  // posture's joints where its start has them wherever the goals allow:
  // the goals' step turns the spine and clavicles by their share of the
  // least-norm step, and the posture's step takes that share back in the
  // goals' null space (the limbs and the pelvis reach instead). A solve
  // from the rest pose (a new character's: posture rounds) has no answer
  // to hold. (Without the hold, a waving hand swung the wave's chest 43
  // degrees a second where the performer's turns 16; held on solves from
  // rest too, a crouch solved from rest and one lowered over a stream
  // ended 3.6 cm apart on BCN, against 0.96 cm.)
  if (!PostureDelta(kRelaxGain, /*hold=*/posture_rounds_ == 0)) return;
  s_.step.head(cols_) += MaxFraction() * s_.delta.head(cols_);
  postured_ = true;
}

double FullBodySolve::PostureError() const {
  if (!posture_ || !places_body_) return 0.0;
  double sum = 0.0;
  for (size_t k = 0; k < model_->relax.size(); ++k) {
    sum += pose_.local[model_->relax[k]].rotation.angularDistance(
        model_->relax_to[k]);
  }
  return sum;
}

bool FullBodySolve::ApplyPosture(double gain, double damping) {
  if (!posture_ || !places_body_ || model_->relax.empty()) return false;
  std::fill(s_.locked.begin(), s_.locked.end(), 0);
  Factor(damping);
  if (!PostureDelta(gain, false)) return false;
  s_.step.head(cols_) = MaxFraction() * s_.delta.head(cols_);
  ApplyStep();
  ForwardKinematics();
  postured_ = true;
  return true;
}

bool FullBodySolve::PostureDelta(double gain, bool hold) {
  const double* J = factored_jacobian_;
  const Eigen::Index stride = factored_stride_;
  const Eigen::MatrixXd& L = s_.cross;
  auto delta = s_.delta.head(cols_);
  auto y = s_.delta_coeffs.head(rows_);
  delta.setZero();
  bool any = false;
  for (size_t k = 0; k < model_->relax.size(); ++k) {
    const int j = model_->relax[k];
    const int c0 = s_.dof_start[j];
    const Joint& joint = skeleton_.joint(j);
    if (c0 < 0) continue;
    // Its turn back to its natural rotation, as a model-space rotation
    // vector (the parent's frame turned to the model's), on its columns.
    Quaterniond back =
        model_->relax_to[k] * pose_.local[j].rotation.conjugate();
    if (back.w() < 0.0) back.coeffs() = -back.coeffs();  // The short way.
    const Quaterniond& parent =
        j == root_ ? root_parent_.rotation : s_.globals[joint.parent].rotation;
    const Vector3d turn =
        RotateVector(parent, RotationVector(back.normalized()));
    for (int i = 0; i < 3; ++i) {
      if (s_.locked[c0 + i]) continue;
      delta(c0 + i) = gain * turn.dot(s_.axis[c0 + i]);
      // Held: less the turn the step about to be taken gives it.
      if (hold) delta(c0 + i) -= s_.step(c0 + i);
      any = true;
    }
  }
  if (!any) return false;
  // y = J delta over each goal's own columns (the Jacobian holds only
  // those; delta is zero but on the posture's few), then (G + mu)^-1 y by
  // the factor L; delta -= W^2 J^T y.
  // y is zero in the rows of goals none of whose columns the posture
  // turns (the feet's, below the trunk): the solve's forward substitution
  // starts at the first row that is not.
  const int goals = static_cast<int>(s_.goal_order.size());
  y.setZero();
  int first = rows_;
  for (int k = 0; k < goals; ++k) {
    const int* cols = s_.goal_cols.data() + s_.goal_col_start[k];
    const int count = s_.goal_col_start[k + 1] - s_.goal_col_start[k];
    const int row = s_.goal_row[k];
    bool turned;
    switch (s_.goal_row[k + 1] - row) {
      case 2:
        turned = AddColumns<2>(J, stride, row, cols, count, delta, y);
        break;
      case 3:
        turned = AddColumns<3>(J, stride, row, cols, count, delta, y);
        break;
      default:
        turned = AddColumns<6>(J, stride, row, cols, count, delta, y);
        break;
    }
    if (turned) first = std::min(first, row);
  }
  CholeskySolveInPlace(L.data(), L.rows(), rows_, y.data(), first);
  auto back = s_.rhs.head(cols_);
  back.setZero();
  for (int k = 0; k < goals; ++k) {
    const int row = s_.goal_row[k];
    const int* cols = s_.goal_cols.data() + s_.goal_col_start[k];
    const int count = s_.goal_col_start[k + 1] - s_.goal_col_start[k];
    switch (s_.goal_row[k + 1] - row) {
      case 2:
        AddTransposed<2>(J, stride, row, cols, count, y, back);
        break;
      case 3:
        AddTransposed<3>(J, stride, row, cols, count, y, back);
        break;
      default:
        AddTransposed<6>(J, stride, row, cols, count, y, back);
        break;
    }
  }
  for (int col = 0; col < cols_; ++col) delta(col) -= s_.scale[col] * back(col);
  return true;
}

double FullBodySolve::StraightenHinge(int j, Quaterniond& local) const {
  // Swing and twist about the flexion axis (twist first) of the turn from
  // the rest rotation.
  const Vector3d& axis = model_->hinge_axis[j];
  const Quaterniond& rest = skeleton_.joint(j).rest.rotation;
  Quaterniond turn = rest.conjugate() * local;
  if (turn.w() < 0.0) turn.coeffs() = -turn.coeffs();
  // Flexed forward (a non-negative sine, w >= 0: flexion in [0, pi], or
  // -0) is never past straight (hinge_straight <= 0): no atan2 for it.
  const double sine = turn.vec().dot(axis);
  if (sine >= 0.0) return 0.0;
  const double flexion = 2.0 * std::atan2(sine, turn.w());
  const double straight = model_->hinge_straight[j];
  if (!(flexion < straight)) return 0.0;
  const Quaterniond twist(Eigen::AngleAxisd(flexion, axis));
  const Quaterniond swing = turn * twist.conjugate();
  local = (rest * swing * Quaterniond(Eigen::AngleAxisd(straight, axis)))
              .normalized();
  return straight - flexion;
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
      const Quaterniond& parent = j == root_
                                      ? root_parent_.rotation
                                      : s_.globals[joint.parent].rotation;
      local = TurnedLocal(parent, turn, local);
      if (Hinged(j) && StraightenHinge(j, local) > kClampedBy) {
        // Its flexion column held at straight, as a limit would be.
        if (!s_.locked[col]) clamped = true;
        s_.locked[col] = 1;
      }
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

}  // namespace full_body_internal
}  // namespace reach
