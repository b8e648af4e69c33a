// The branch-free two-bone solve behind SolveTwoBoneLimbs (two_bone.h).
// Internal to solvers/: two_bone.cc and two_bone_avx2.cc include it.
//
// One template serves one limb (T = double), two limbs in SSE2 lanes
// (T = Lanes2) and four in AVX2 lanes (T = Lanes4, only where the
// translation unit is built for AVX2), with GCC's vector extensions. Every
// width runs the same IEEE operations in the same order (no fused
// multiply-add), so a limb's result does not depend on its lane or on the
// width. The general path's branches become selects; a lane whose case
// needs a branch the selects do not cover clears its `ok` mask and is
// solved by the general path instead.
//
// The kernel has internal linkage (an unnamed namespace), and the header
// includes no Eigen: the AVX2 translation unit's copies of inline
// functions must never stand in for the baseline ones at link time.
#ifndef REACH_SOLVERS_TWO_BONE_LANES_H_
#define REACH_SOLVERS_TWO_BONE_LANES_H_

#include <cmath>
#include <cstring>

namespace reach {
namespace two_bone_lanes {

// Up to four limbs, structure of arrays: component c of lane l's limb is
// row[c][l]. Model space, as TwoBoneLimb (two_bone.h). Plain doubles, so
// the AVX2 translation unit needs no Eigen (whose inline functions and
// alignment would differ there).
inline constexpr int kBlockLanes = 4;
struct LimbBlock {
  double root[3][kBlockLanes];
  double mid[3][kBlockLanes];
  double tip[3][kBlockLanes];
  double target[3][kBlockLanes];
  double pole[3][kBlockLanes];  // The root's position when there is none.
  double parent[4][kBlockLanes];  // Quaternions as w, x, y, z rows.
  double root_rotation[4][kBlockLanes];
  double mid_rotation[4][kBlockLanes];
  double mid_local[4][kBlockLanes];
  double has_pole[kBlockLanes];  // 1 or 0.
};
struct LimbBlockResult {
  double root_local[4][kBlockLanes];
  double mid_local[4][kBlockLanes];
  double ok[kBlockLanes];  // 1: solved; 0: left to the general path.
};

// The AVX2 build of SolveBlock over all four lanes (two_bone_avx2.cc).
void SolveBlockAvx2(const LimbBlock& in, LimbBlockResult* out);

namespace {

constexpr double kTinySq = 1e-24;  // (1e-12)^2
// Targets and poles farther than this from the root (squared) only give a
// direction: the general path brings them nearer first, so no square
// overflows.
constexpr double kFarSq = 1e100;

using Lanes2 = double __attribute__((vector_size(16)));
using Mask2 = decltype(Lanes2{} < Lanes2{});  // All bits set: true.

inline double Select(bool m, double a, double b) { return m ? a : b; }
inline Lanes2 Select(Mask2 m, Lanes2 a, Lanes2 b) { return m ? a : b; }
inline bool Not(bool m) { return !m; }
inline Mask2 Not(Mask2 m) { return ~m; }
inline double Sqrt(double x) { return std::sqrt(x); }
inline Lanes2 Sqrt(Lanes2 x) {
  return Lanes2{std::sqrt(x[0]), std::sqrt(x[1])};  // One sqrtpd.
}

#ifdef __AVX2__
// Four lanes: only in translation units built for AVX2.
using Lanes4 = double __attribute__((vector_size(32)));
using Mask4 = decltype(Lanes4{} < Lanes4{});

inline Lanes4 Select(Mask4 m, Lanes4 a, Lanes4 b) { return m ? a : b; }
inline Mask4 Not(Mask4 m) { return ~m; }
inline Lanes4 Sqrt(Lanes4 x) {
  return Lanes4{std::sqrt(x[0]), std::sqrt(x[1]), std::sqrt(x[2]),
                std::sqrt(x[3])};  // One vsqrtpd.
}
#endif

// std::max / std::min semantics (the first argument on a tie or NaN).
template <class T>
inline T Max(T a, T b) {
  return Select(a < b, b, a);
}
template <class T>
inline T Min(T a, T b) {
  return Select(b < a, b, a);
}
template <class T>
inline T Splat(double x) {
  return T{} + x;
}

template <class T>
struct Vec {
  T x, y, z;
};
template <class T>
inline Vec<T> operator+(const Vec<T>& a, const Vec<T>& b) {
  return {a.x + b.x, a.y + b.y, a.z + b.z};
}
template <class T>
inline Vec<T> operator-(const Vec<T>& a, const Vec<T>& b) {
  return {a.x - b.x, a.y - b.y, a.z - b.z};
}
template <class T>
inline Vec<T> operator*(T s, const Vec<T>& v) {
  return {s * v.x, s * v.y, s * v.z};
}
template <class T>
inline T Dot(const Vec<T>& a, const Vec<T>& b) {
  return a.x * b.x + a.y * b.y + a.z * b.z;
}
template <class T>
inline Vec<T> Cross(const Vec<T>& a, const Vec<T>& b) {
  return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z,
          a.x * b.y - a.y * b.x};
}

template <class T>
struct Quat {
  T w, x, y, z;
};
template <class T>
inline Quat<T> operator*(const Quat<T>& a, const Quat<T>& b) {
  return {a.w * b.w - a.x * b.x - a.y * b.y - a.z * b.z,
          a.w * b.x + a.x * b.w + a.y * b.z - a.z * b.y,
          a.w * b.y + a.y * b.w + a.z * b.x - a.x * b.z,
          a.w * b.z + a.z * b.w + a.x * b.y - a.y * b.x};
}
template <class T>
inline Quat<T> Conjugate(const Quat<T>& q) {
  return {q.w, -q.x, -q.y, -q.z};
}
// q v q* for any q: v turned by q's rotation, times |q|^2 (as ScaledRotate).
template <class T>
inline Vec<T> ScaledRotate(const Quat<T>& q, const Vec<T>& v) {
  const Vec<T> u{q.x, q.y, q.z};
  return (q.w * q.w - Dot(u, u)) * v + (2.0 * Dot(u, v)) * u +
         (2.0 * q.w) * Cross(u, v);
}

template <class T>
struct LimbIn {
  Vec<T> root, mid, tip, target, pole;
  Quat<T> parent, root_rotation, mid_rotation, mid_local;
  decltype(T{} < T{}) has_pole;
};
template <class T>
struct LimbOut {
  Quat<T> root_local, mid_local;
  decltype(T{} < T{}) ok;
};

// TwoBoneSolver::Solve's result for a ball chain without limits, soft or
// stretch, from the same geometry in a form with a short dependency chain.
// The general path works step by step: it bends the mid joint, finds where
// the tip went, aims the root at the target, then sees where the mid joint
// went and twists it towards the pole; each step waits for the square
// roots and divisions of the one before. Here every square root depends
// only on the inputs, and the steps are closed-form in them.
//
// In the plane of the bones (unit axis n = N / |N| across both; e1 = ab /
// |ab|, e2 = n x e1) the law of cosines gives the bend. With r = |ab||me|,
// h = (d^2 - |ab|^2 - |me|^2) / 2 clamped to [-r, r] and q = sqrt(r^2 -
// h^2), the bent second bone is (h ab + q (n x ab)) / |ab|^2, so the tip's
// offset from the root, times |N| |ab|^2, is
//   U = |N| (|ab|^2 + h) ab + q (N x ab),   |U| = |N| |ab|^2 d_c
// (d_c: the distance the chain spans), and the mid joint's direction
// across it is V = q |N| ab - (|ab|^2 + h) (N x ab), with |V| = |U|.
//  - The mid joint turns about n from its angle t0 (ab to me) to t1 =
//    acos(h / r): the half-angle quaternion is exp(i t1/2) exp(-i t0/2),
//    each half angle taken from an unnormalised (cos, sin) without
//    cancellation.
//  - The root's aim is the smallest rotation from U to the target's
//    direction: (|U||L| + U.L, U x L), with |U||L| known without a square
//    root of U.
//  - The twist about the line turns aim(V) onto the pole's direction.
// Both results are normalised once, by norms known in advance.
template <class T>
void SolveLimbKernel(const LimbIn<T>& in, LimbOut<T>* out) {
  using Mask = decltype(T{} < T{});
  const T zero = Splat<T>(0.0);
  const T one = Splat<T>(1.0);
  const Vec<T> ab = in.mid - in.root;
  const Vec<T> me = in.tip - in.mid;
  const T ab_sq = Dot(ab, ab);
  const T me_sq = Dot(me, me);
  const T scale_sq = Max(2.0 * (ab_sq + me_sq), Splat<T>(kTinySq));
  const Vec<T> line = in.target - in.root;  // To the target.
  const T d_sq = Dot(line, line);
  const Vec<T> pole_offset = in.pole - in.root;
  const T pole_sq = Dot(pole_offset, pole_offset);
  Mask ok = (d_sq > kTinySq) & (d_sq <= kFarSq) &
            (Not(in.has_pole) | (pole_sq <= kFarSq));

  // 1. The mid joint's bend axis N (unnormalised, model space): the bones'
  // normal in a bent chain; in a straight one, towards the pole (pole x
  // chain direction), else any perpendicular of the chain (Eigen's
  // unitOrthogonal). A straight chain must be straight to rounding, with
  // its tip off the root, so that N lies across both bones.
  const Vec<T> normal = Cross(ab, me);
  const T normal_sq = Dot(normal, normal);
  const T r_sq = ab_sq * me_sq;
  const Mask bent = (normal_sq > 1e-18 * r_sq) & (normal_sq > kTinySq);
  const Vec<T> chain_dir = in.tip - in.root;
  const T chain_sq = Dot(chain_dir, chain_dir);
  ok &= bent | ((chain_sq > kTinySq) & (normal_sq <= 1e-28 * r_sq));
  const Vec<T> side_normal = Cross(pole_offset, chain_dir);
  const T side_sq = Dot(side_normal, side_normal);
  const Mask to_pole =
      in.has_pole & (side_sq > 1e-18 * scale_sq * chain_sq) & (side_sq > 0.0);
  const T ax = Select(chain_dir.x < 0.0, -chain_dir.x, chain_dir.x);
  const T ay = Select(chain_dir.y < 0.0, -chain_dir.y, chain_dir.y);
  const T az = Select(chain_dir.z < 0.0, -chain_dir.z, chain_dir.z);
  const T az_small = az * 1e-12;  // Eigen's isMuchSmallerThan(x, z).
  const Mask xy = (ax > az_small) | (ay > az_small);
  const Vec<T> any_normal{Select(xy, -chain_dir.y, zero),
                          Select(xy, chain_dir.x, -chain_dir.z),
                          Select(xy, zero, chain_dir.y)};
  const Vec<T> axis{
      Select(bent, normal.x, Select(to_pole, side_normal.x, any_normal.x)),
      Select(bent, normal.y, Select(to_pole, side_normal.y, any_normal.y)),
      Select(bent, normal.z, Select(to_pole, side_normal.z, any_normal.z))};
  const T axis_sq = Dot(axis, axis);
  const T axis_len = Sqrt(axis_sq);

  // 2. The law of cosines. All square roots here wait only on the inputs.
  const T ab_len = Sqrt(ab_sq);
  const T me_len = Sqrt(me_sq);
  const T d = Sqrt(d_sq);
  const T r = ab_len * me_len;
  ok &= r_sq > 1e-24 * Max(one, scale_sq * scale_sq);
  const T h_free = 0.5 * (d_sq - (ab_sq + me_sq));
  // Clamped: fully extended (or folded) exactly.
  const Mask clamped = Max(h_free, -h_free) >= r;
  const T h = Min(Max(h_free, -r), r);
  const T q = Select(clamped, zero, Sqrt(Max(zero, r_sq - h_free * h_free)));
  ok &= ab_sq + me_sq + 2.0 * h > kTinySq;  // The tip off the root.
  // d_c, and d_c |L| (exact when the target is in reach).
  const T span = Select(clamped,
                        Select(h_free > 0.0, ab_len + me_len,
                               Max(ab_len - me_len, me_len - ab_len)),
                        d);
  const T span_d = Select(clamped, span * d, d_sq);

  // 3. The mid joint's turn, from t0 to t1 about n. Half angles of
  // (c, s) = rho (cos t, sin t), s >= 0: (rho + c, s) when c >= 0, else
  // (s, rho - c), both proportional to (cos t/2, sin t/2).
  const T c0 = axis_len * Dot(ab, me);
  const T s0 = Dot(normal, axis);  // |N| r sin t0: |N|^2 when bent.
  const T rho0 = axis_len * r;
  const Mask c0_pos = c0 >= 0.0;
  const T half0_c = Select(c0_pos, rho0 + c0, s0);
  const T half0_s = Select(c0_pos, s0, rho0 - c0);
  const Mask h_pos = h >= 0.0;
  const T half1_c = Select(h_pos, r + h, q);
  const T half1_s = Select(h_pos, q, r - h);
  T turn_c = half1_c * half0_c + half1_s * half0_s;
  T turn_s = half1_s * half0_c - half1_c * half0_s;
  const Mask flip = turn_c < 0.0;  // The same rotation with w >= 0.
  turn_c = Select(flip, -turn_c, turn_c);
  turn_s = Select(flip, -turn_s, turn_s);
  // n in the mid joint's frame is local_axis / |N|.
  const Vec<T> local_axis = ScaledRotate(Conjugate(in.mid_rotation), axis);
  const Quat<T> turn{turn_c * axis_len, turn_s * local_axis.x,
                     turn_s * local_axis.y, turn_s * local_axis.z};
  const T turn_sq =
      turn.w * turn.w + turn.x * turn.x + turn.y * turn.y + turn.z * turn.z;
  const Quat<T> mid = in.mid_local * turn;
  const T mid_scale = Sqrt(turn_sq) * (1.0 / turn_sq);  // In parallel.
  out->mid_local = {mid.w * mid_scale, mid.x * mid_scale, mid.y * mid_scale,
                    mid.z * mid_scale};

  // 4. The root's aim: the smallest rotation from U to L, unnormalised.
  // U's products with L come from products of ab and N x ab taken early.
  const Vec<T> n_ab = Cross(axis, ab);
  const T u_ab = axis_len * (ab_sq + h);  // U = u_ab ab + q n_ab.
  const T u_line = u_ab * Dot(ab, line) + q * Dot(n_ab, line);
  const Vec<T> u_x_line = u_ab * Cross(ab, line) + q * Cross(n_ab, line);
  const T u_len_line = axis_len * ab_sq * span_d;  // |U| |L|
  const Quat<T> aim{u_len_line + u_line, u_x_line.x, u_x_line.y, u_x_line.z};
  const T aim_sq =
      aim.w * aim.w + aim.x * aim.x + aim.y * aim.y + aim.z * aim.z;
  ok &= aim.w >= 5e-31 * u_len_line;  // The tip not turned away exactly.

  // 5. The twist about the line that turns the mid joint's direction,
  // aim(V) (|aim|^2 times too long), onto the pole's across the line, P:
  // (|m||P| + m.P, L (m . P x L) / |L|^2).
  const T inv_line_sq = 1.0 / d_sq;
  const Vec<T> pole_dir =
      pole_offset - (Dot(pole_offset, line) * inv_line_sq) * line;
  const T pole_dir_sq = Dot(pole_dir, pole_dir);
  const Mask use_pole = in.has_pole & (pole_dir_sq > 1e-18 * scale_sq);
  const Vec<T> pole_side = Cross(pole_dir, line);
  const Vec<T> v = (q * axis_len) * ab - (ab_sq + h) * n_ab;
  const Vec<T> m = ScaledRotate(aim, v);
  const T cos_part = Dot(m, pole_dir);
  const T sin_part = Dot(m, pole_side);
  const T rr = (axis_len * ab_sq * span) * Sqrt(pole_dir_sq) * aim_sq;
  const T axis_scale = sin_part * inv_line_sq;
  const Mask not_opposite = rr + cos_part > 1e-15 * rr;
  const Quat<T> twist{
      Select(use_pole, Select(not_opposite, rr + cos_part, zero), one),
      Select(use_pole, Select(not_opposite, axis_scale * line.x, line.x), zero),
      Select(use_pole, Select(not_opposite, axis_scale * line.y, line.y), zero),
      Select(use_pole, Select(not_opposite, axis_scale * line.z, line.z),
             zero)};
  const T twist_sq = twist.w * twist.w + twist.x * twist.x +
                     twist.y * twist.y + twist.z * twist.z;

  // The root's new local rotation; parent and start rotations are unit, so
  // its norm is |twist| |aim|.
  const Quat<T> root =
      (Conjugate(in.parent) * twist) * (aim * in.root_rotation);
  const T root_sq = twist_sq * aim_sq;
  const T root_scale = Sqrt(root_sq) * (1.0 / root_sq);
  out->root_local = {root.w * root_scale, root.x * root_scale,
                     root.y * root_scale, root.z * root_scale};
  // Far from 1 in scale (a chain many orders of magnitude from unit
  // length, a target or pole very far off): the general path, which
  // rescales.
  ok &= (aim_sq > 1e-140) & (aim_sq < 1e140) & (root_sq > 1e-280) &
        (root_sq < 1e280) & (turn_sq > 1e-280) & (turn_sq < 1e280);
  out->ok = ok;
}

// A T from lanes [lane, lane + width) of a row.
template <class T>
inline T Load(const double* row, int lane) {
  T v;
  std::memcpy(&v, row + lane, sizeof(T));
  return v;
}
template <class T>
inline void Store(const T& v, double* row, int lane) {
  std::memcpy(row + lane, &v, sizeof(T));
}
template <class T>
inline Vec<T> LoadVec(const double (*rows)[kBlockLanes], int lane) {
  return {Load<T>(rows[0], lane), Load<T>(rows[1], lane),
          Load<T>(rows[2], lane)};
}
template <class T>
inline Quat<T> LoadQuat(const double (*rows)[kBlockLanes], int lane) {
  return {Load<T>(rows[0], lane), Load<T>(rows[1], lane),
          Load<T>(rows[2], lane), Load<T>(rows[3], lane)};
}
template <class T>
inline void StoreQuat(const Quat<T>& q, double (*rows)[kBlockLanes],
                      int lane) {
  Store(q.w, rows[0], lane);
  Store(q.x, rows[1], lane);
  Store(q.y, rows[2], lane);
  Store(q.z, rows[3], lane);
}

// Solves the limbs in lanes [lane, lane + the lane count of T) of `in`.
template <class T>
void SolveBlock(const LimbBlock& in, int lane, LimbBlockResult* out) {
  LimbIn<T> limb;
  limb.root = LoadVec<T>(in.root, lane);
  limb.mid = LoadVec<T>(in.mid, lane);
  limb.tip = LoadVec<T>(in.tip, lane);
  limb.target = LoadVec<T>(in.target, lane);
  limb.pole = LoadVec<T>(in.pole, lane);
  limb.parent = LoadQuat<T>(in.parent, lane);
  limb.root_rotation = LoadQuat<T>(in.root_rotation, lane);
  limb.mid_rotation = LoadQuat<T>(in.mid_rotation, lane);
  limb.mid_local = LoadQuat<T>(in.mid_local, lane);
  limb.has_pole = Load<T>(in.has_pole, lane) > 0.0;
  LimbOut<T> solved;
  SolveLimbKernel(limb, &solved);
  StoreQuat(solved.root_local, out->root_local, lane);
  StoreQuat(solved.mid_local, out->mid_local, lane);
  Store(Select(solved.ok, Splat<T>(1.0), Splat<T>(0.0)), out->ok, lane);
}

}  // namespace
}  // namespace two_bone_lanes
}  // namespace reach

#endif  // REACH_SOLVERS_TWO_BONE_LANES_H_
