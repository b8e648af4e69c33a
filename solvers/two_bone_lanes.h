// The branch-free two-bone solve behind SolveTwoBoneLimbs (two_bone.h).
// Internal to solvers/: two_bone.cc and two_bone_avx2.cc include it.
//
// One template serves one limb (T = double), two limbs in SSE2 lanes
// (T = Lanes2) and four in AVX2 lanes (T = Lanes4, only where the
// translation unit is built for AVX2), with GCC's vector extensions. Every
// width of a build runs the same IEEE operations in the same order
// (products are fused only where Fma says, and only in a build for FMA),
// so a limb's result does not depend on its lane or on the width. The
// general path's branches become selects; a lane whose case
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

#ifdef __FMA__
#include <immintrin.h>
#endif

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
  double tip_local[3][kBlockLanes];  // The tip joint's local translation.
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

// One limb's fields where they are, in Eigen's layouts (points x, y, z;
// quaternions x, y, z, w): nothing is copied on the way in.
struct LimbRefs {
  const double* root;
  const double* mid;
  const double* tip;
  const double* tip_local;
  const double* target;
  const double* pole;  // The root's position when there is none.
  const double* parent;
  const double* root_rotation;
  const double* mid_rotation;
  const double* mid_local;
  bool has_pole;
};

// The AVX2 + FMA builds (two_bone_avx2.cc): SolveBlock over all four lanes,
// and SolveOne.
void SolveBlockAvx2(const LimbBlock& in, LimbBlockResult* out);
bool SolveOneAvx2(const LimbRefs& in, double* root_local, double* mid_local);

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
// Whether any lane is true: work only some lanes need is skipped when none
// does (it does not change the other lanes' results).
inline bool AnyTrue(bool m) { return m; }
inline bool AnyTrue(Mask2 m) { return (m[0] | m[1]) != 0; }
inline double Sqrt(double x) { return std::sqrt(x); }
inline Lanes2 Sqrt(Lanes2 x) {
  return Lanes2{std::sqrt(x[0]), std::sqrt(x[1])};  // One sqrtpd.
}

// a * b + c: fused (one rounding) where the translation unit is built for
// FMA (two_bone_avx2.cc), else a product and a sum. Both kernel units are
// built with -ffp-contract=off, so no other product is fused and every
// width of a build runs the same operations.
template <class T>
inline T Fma(T a, T b, T c) {
#ifdef __FMA__
  if constexpr (sizeof(T) == sizeof(double)) {
    return __builtin_fma(a, b, c);
  } else if constexpr (sizeof(T) == 2 * sizeof(double)) {
    return _mm_fmadd_pd(a, b, c);
  } else {
    return _mm256_fmadd_pd(a, b, c);
  }
#else
  return a * b + c;
#endif
}

#ifdef __AVX2__
// Four lanes: only in translation units built for AVX2.
using Lanes4 = double __attribute__((vector_size(32)));
using Mask4 = decltype(Lanes4{} < Lanes4{});

inline Lanes4 Select(Mask4 m, Lanes4 a, Lanes4 b) { return m ? a : b; }
inline Mask4 Not(Mask4 m) { return ~m; }
inline bool AnyTrue(Mask4 m) { return ((m[0] | m[1]) | (m[2] | m[3])) != 0; }
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
// a s + b t.
template <class T>
inline Vec<T> Combine(T s, const Vec<T>& a, T t, const Vec<T>& b) {
  return {Fma(s, a.x, t * b.x), Fma(s, a.y, t * b.y), Fma(s, a.z, t * b.z)};
}
template <class T>
inline T Dot(const Vec<T>& a, const Vec<T>& b) {
  return Fma(a.x, b.x, Fma(a.y, b.y, a.z * b.z));
}
template <class T>
inline Vec<T> Cross(const Vec<T>& a, const Vec<T>& b) {
  return {Fma(a.y, b.z, -(a.z * b.y)), Fma(a.z, b.x, -(a.x * b.z)),
          Fma(a.x, b.y, -(a.y * b.x))};
}

template <class T>
struct Quat {
  T w, x, y, z;
};
template <class T>
inline Quat<T> operator*(const Quat<T>& a, const Quat<T>& b) {
  return {Fma(a.w, b.w, -(a.x * b.x)) - Fma(a.y, b.y, a.z * b.z),
          Fma(a.w, b.x, a.x * b.w) + Fma(a.y, b.z, -(a.z * b.y)),
          Fma(a.w, b.y, a.y * b.w) + Fma(a.z, b.x, -(a.x * b.z)),
          Fma(a.w, b.z, a.z * b.w) + Fma(a.x, b.y, -(a.y * b.x))};
}
// a s + b t.
template <class T>
inline Quat<T> Combine(T s, const Quat<T>& a, T t, const Quat<T>& b) {
  return {Fma(s, a.w, t * b.w), Fma(s, a.x, t * b.x), Fma(s, a.y, t * b.y),
          Fma(s, a.z, t * b.z)};
}
template <class T>
inline Quat<T> Conjugate(const Quat<T>& q) {
  return {q.w, -q.x, -q.y, -q.z};
}
template <class T>
struct LimbIn {
  Vec<T> root, mid, tip, tip_local, target, pole;
  Quat<T> parent, root_rotation, mid_rotation, mid_local;
  decltype(T{} < T{}) has_pole;
};
template <class T>
struct LimbOut {
  Quat<T> root_local, mid_local;
  decltype(T{} < T{}) ok;
};

// TwoBoneSolver::Solve's result for a ball chain without limits, soft or
// stretch, from the same geometry in closed form. The general path works
// step by step: it bends the mid joint, finds where the tip went, aims the
// root at the target, sees where the mid joint went and twists it towards
// the pole, and each step waits for the square roots and divisions of the
// one before. Here every square root but the two final normalisations (and
// a clamped chain's spans, which wait for r) depends only on the inputs,
// and the statements come in the order the
// values are needed (GCC keeps that order, and the out-of-order window is
// shorter than the kernel).
//
// In the plane of the bones (unit axis n = N / |N| across both, e1 = ab /
// |ab|, e2 = n x e1) the law of cosines gives the bend: with r = |ab||me|,
// h = (d^2 - |ab|^2 - |me|^2) / 2 clamped to [-r, r] and q = sqrt(r^2 -
// h^2), the bent second bone is (h ab + q (n x ab)) / |ab|^2. So the tip's
// offset from the root, times |N| |ab|^2, is
//   U = |N| (|ab|^2 + h) ab + q (N x ab),   |U| = |N| |ab|^2 d_c
// (d_c: the distance the chain then spans), and the mid joint's direction
// across it is V = q |N| ab - (|ab|^2 + h) (N x ab), |V| = |U|.
//  - The mid joint turns about n from its angle t0 (ab to me) to t1 =
//    acos(h / r): the half-angle quaternion is exp(i t1/2) exp(-i t0/2),
//    each half angle from an unnormalised (cos, sin) without cancellation.
//  - The root's aim is the smallest rotation from U to the line L to the
//    target, (|U||L| + U.L, U x L), with |U||L| known without U.
//  - The twist about L turns aim(V) onto P, the pole's direction across L
//    (times |L|^2). For x across L, aim(V).x = V.x - (V.L)(U.x) / (|U||L| +
//    U.L), so the twist's cosine and sine come from products of ab and
//    N x ab with L, P and P x L, taken before any square root.
// The results are normalised once each.
template <class T>
void SolveLimbKernel(const LimbIn<T>& in, LimbOut<T>* out) {
  using Mask = decltype(T{} < T{});
  const T zero = Splat<T>(0.0);
  const T one = Splat<T>(1.0);
  const Vec<T> ab = in.mid - in.root;
  const Vec<T> me = in.tip - in.mid;
  const Vec<T> line = in.target - in.root;  // L, to the target.
  const T ab_sq = Dot(ab, ab);
  const T me_sq = Dot(me, me);
  const T d_sq = Dot(line, line);
  const T r_sq = ab_sq * me_sq;

  // 1. The law of cosines: q first, the longest wait.
  const T h_free = 0.5 * (d_sq - (ab_sq + me_sq));
  // Clamped: fully extended (or folded) exactly.
  const Mask clamped = h_free * h_free >= r_sq;
  const T q =
      Select(clamped, zero, Sqrt(Max(zero, Fma(-h_free, h_free, r_sq))));

  // 2. The mid joint's bend axis N (unnormalised, model space): the bones'
  // normal in a bent chain; in a straight one an axis fixed in the mid
  // joint's frame across the second bone (the general path's
  // StraightBendAxis, bend_plane.h: Eigen's unitOrthogonal of the tip's local
  // translation, turned to model space), so the bend follows the limb's
  // frames.
  const Vec<T> normal = Cross(ab, me);
  const T normal_sq = Dot(normal, normal);
  const Mask bent = (normal_sq > 1e-18 * r_sq) & (normal_sq > kTinySq);
  const Vec<T> pole_offset = in.pole - in.root;
  const T scale_sq = Max(2.0 * (ab_sq + me_sq), Splat<T>(kTinySq));
  Vec<T> axis = normal;
  Mask axis_ok = bent;
  if (AnyTrue(Not(bent))) {
    const Vec<T> chain_dir = in.tip - in.root;
    const T chain_sq = Dot(chain_dir, chain_dir);
    const Vec<T>& local = in.tip_local;
    const T ax = Select(local.x < 0.0, -local.x, local.x);
    const T ay = Select(local.y < 0.0, -local.y, local.y);
    const T az = Select(local.z < 0.0, -local.z, local.z);
    const T az_small = az * 1e-12;  // Eigen's isMuchSmallerThan(x, z).
    const Mask xy = (ax > az_small) | (ay > az_small);
    const Vec<T> any_normal{Select(xy, -local.y, zero),
                            Select(xy, local.x, -local.z),
                            Select(xy, zero, local.y)};
    // any_normal turned by the mid joint's rotation M = (w, u):
    // v + 2 (w (u x v) + u x (u x v)).
    const Vec<T> u{in.mid_rotation.x, in.mid_rotation.y, in.mid_rotation.z};
    const Vec<T> uv = Cross(u, any_normal);
    const Vec<T> uuv = Cross(u, uv);
    const T two = Splat<T>(2.0);
    const T w = in.mid_rotation.w;
    const Vec<T> straight_axis{Fma(two, Fma(w, uv.x, uuv.x), any_normal.x),
                               Fma(two, Fma(w, uv.y, uuv.y), any_normal.y),
                               Fma(two, Fma(w, uv.z, uuv.z), any_normal.z)};
    axis = {Select(bent, normal.x, straight_axis.x),
            Select(bent, normal.y, straight_axis.y),
            Select(bent, normal.z, straight_axis.z)};
    // A straight chain must be straight to rounding, with its tip off the
    // root and a second bone, so that N lies across both bones.
    axis_ok |= (chain_sq > kTinySq) & (Dot(local, local) > kTinySq) &
               (normal_sq <= 1e-28 * r_sq);
  }
  const T axis_len = Sqrt(Dot(axis, axis));

  // P = |L|^2 (the pole's offset across L).
  const Vec<T> pole =
      Combine(d_sq, pole_offset, -Dot(pole_offset, line), line);
  const T pole_sq = Dot(pole, pole);
  const T r = Sqrt(r_sq);
  const T h = Min(Max(h_free, -r), r);
  // d_c |L| and d_c |P|, d_c the distance the chain spans (|L| when the
  // target is in reach): d_c^2 = |ab|^2 + |me|^2 + 2h.
  const T span_sq = Fma(Splat<T>(2.0), h, ab_sq + me_sq);
  T span_line = d_sq;
  T span_pole = Sqrt(d_sq * pole_sq);
  if (AnyTrue(clamped)) {
    span_line = Select(clamped, Sqrt(span_sq * d_sq), span_line);
    span_pole = Select(clamped, Sqrt(span_sq * pole_sq), span_pole);
  }

  // Products of ab and N x ab with L, P and P x L (U's and V's, below).
  const Vec<T> n_ab = Cross(axis, ab);
  const T ab_line = Dot(ab, line);
  const T nx_line = Dot(n_ab, line);
  const Vec<T> ab_x_line = Cross(ab, line);
  const Vec<T> nx_x_line = Cross(n_ab, line);
  const T ab_pole = Dot(ab, pole);
  const T nx_pole = Dot(n_ab, pole);
  // x . (P x L) = -P . (x x L).
  const T ab_side = -Dot(pole, ab_x_line);
  const T nx_side = -Dot(pole, nx_x_line);

  // 3. The root's aim: the smallest rotation from U to L, unnormalised.
  const T hb = ab_sq + h;
  const T u_ab = axis_len * hb;  // U = u_ab ab + q (N x ab).
  const T v_ab = q * axis_len;   // V = v_ab ab - hb (N x ab).
  const T n_ab_sq = axis_len * ab_sq;
  const T u_len_line = n_ab_sq * span_line;  // |U||L|
  const T aim_w = u_len_line + Fma(u_ab, ab_line, q * nx_line);
  const Vec<T> aim_v = Combine(u_ab, ab_x_line, q, nx_x_line);
  const Quat<T> aim{aim_w, aim_v.x, aim_v.y, aim_v.z};

  // The parent's inverse times L (the twist's axis), for the root's
  // rotation below.
  const Quat<T> parent_inv = Conjugate(in.parent);
  const Quat<T> parent_line =
      parent_inv * Quat<T>{zero, line.x, line.y, line.z};

  // 4. The twist about L, as the half-angle quaternion (|m||P| + m.P,
  // L (m . P x L) / |L|^2) of the angle from m = aim(V) to P, all times
  // |L|^2 (|U||L| + U.L).
  const T v_line = Fma(v_ab, ab_line, -(hb * nx_line));
  const T cos_part = Fma(aim_w, Fma(v_ab, ab_pole, -(hb * nx_pole)),
                         -(v_line * Fma(u_ab, ab_pole, q * nx_pole)));
  const T sin_part = Fma(aim_w, Fma(v_ab, ab_side, -(hb * nx_side)),
                         -(v_line * Fma(u_ab, ab_side, q * nx_side)));
  const T rr = (n_ab_sq * span_pole) * aim_w;  // |V||P| aim_w
  const Mask use_pole =
      in.has_pole & (pole_sq > 1e-18 * scale_sq * (d_sq * d_sq));
  const Mask not_opposite = rr + cos_part > 1e-15 * rr;
  // twist = (twist_w, twist_l L); a half turn about L when m and P are
  // opposite.
  const T twist_w =
      Select(use_pole, Select(not_opposite, d_sq * (rr + cos_part), zero), one);
  const T twist_l =
      Select(use_pole, Select(not_opposite, sin_part, one), zero);

  // The root's new local rotation: parent^-1 twist aim start.
  const Quat<T> root = Combine(twist_w, parent_inv, twist_l, parent_line) *
                       (aim * in.root_rotation);
  // |aim|^2 = 2 |U||L| (|U||L| + U.L).
  const T aim_sq = 2.0 * u_len_line * aim_w;
  const T root_sq = Fma(twist_w, twist_w, twist_l * twist_l * d_sq) * aim_sq;
  const T root_scale = 1.0 / Sqrt(root_sq);
  out->root_local = {root.w * root_scale, root.x * root_scale,
                     root.y * root_scale, root.z * root_scale};

  // 5. The mid joint's turn, from t0 to t1 about n. Half angles of
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
  T turn_c = Fma(half1_c, half0_c, half1_s * half0_s);
  T turn_s = Fma(half1_s, half0_c, -(half1_c * half0_s));
  const Mask flip = turn_c < 0.0;  // The same rotation with w >= 0.
  turn_c = Select(flip, -turn_c, turn_c);
  turn_s = Select(flip, -turn_s, turn_s);
  // The turn in the mid joint's frame is R^-1 (c |N|, s N) R, R the mid
  // joint's model-space rotation, and the mid joint's local rotation times
  // R^-1 is the root's (its parent's) inverse. So the new local rotation is
  //   local (c |N|, s R^-1 N R) = c |N| local + s root^-1 (0, N) R.
  const Quat<T> axis_mid =
      Conjugate(in.root_rotation) *
      (Quat<T>{zero, axis.x, axis.y, axis.z} * in.mid_rotation);
  const T turn_w = turn_c * axis_len;
  const Quat<T> mid = Combine(turn_w, in.mid_local, turn_s, axis_mid);
  // |(c |N|, s N)|^2 = (c^2 + s^2) |N|^2.
  const T turn_sq =
      Fma(turn_c, turn_c, turn_s * turn_s) * (axis_len * axis_len);
  const T mid_scale = 1.0 / Sqrt(turn_sq);
  out->mid_local = {mid.w * mid_scale, mid.x * mid_scale, mid.y * mid_scale,
                    mid.z * mid_scale};

  // The cases left to the general path.
  const T pole_offset_sq = Dot(pole_offset, pole_offset);
  Mask ok = (d_sq > kTinySq) & (d_sq <= kFarSq) &
            (Not(in.has_pole) | (pole_offset_sq <= kFarSq));
  ok &= axis_ok;
  ok &= r_sq > 1e-24 * Max(one, scale_sq * scale_sq);  // Bones not zero.
  ok &= span_sq > kTinySq;  // The tip off the root.
  // The tip turned (nearly) away from the target: aim(V) above loses
  // precision as |U||L| + U.L -> 0.
  ok &= aim_w >= 1e-6 * u_len_line;
  // Far from 1 in scale (a chain many orders of magnitude from unit
  // length, a target or pole very far off): the general path rescales.
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
  limb.tip_local = LoadVec<T>(in.tip_local, lane);
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

// One limb in scalar code. When the kernel solves it, writes the root's
// and the mid joint's new local rotations (x, y, z, w; they may be
// mid_local itself: every input is read first) and returns true.
inline bool SolveOne(const LimbRefs& in, double* root_local,
                     double* mid_local) {
  const auto vec = [](const double* v) {
    return Vec<double>{v[0], v[1], v[2]};
  };
  const auto quat = [](const double* q) {
    return Quat<double>{q[3], q[0], q[1], q[2]};
  };
  LimbIn<double> limb;
  limb.root = vec(in.root);
  limb.mid = vec(in.mid);
  limb.tip = vec(in.tip);
  limb.tip_local = vec(in.tip_local);
  limb.target = vec(in.target);
  limb.pole = vec(in.pole);
  limb.parent = quat(in.parent);
  limb.root_rotation = quat(in.root_rotation);
  limb.mid_rotation = quat(in.mid_rotation);
  limb.mid_local = quat(in.mid_local);
  limb.has_pole = in.has_pole;
  LimbOut<double> solved;
  SolveLimbKernel(limb, &solved);
  if (!solved.ok) return false;
  // In 16-byte stores: a caller's 16-byte load cannot take its value from
  // two 8-byte stores in flight.
  const auto store = [](const Quat<double>& q, double* to) {
    const Lanes2 xy{q.x, q.y};
    const Lanes2 zw{q.z, q.w};
    std::memcpy(to, &xy, sizeof(xy));
    std::memcpy(to + 2, &zw, sizeof(zw));
  };
  store(solved.root_local, root_local);
  store(solved.mid_local, mid_local);
  return true;
}

}  // namespace
}  // namespace two_bone_lanes
}  // namespace reach

#endif  // REACH_SOLVERS_TWO_BONE_LANES_H_
