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

// TwoBoneSolver::Solve's path for a bent ball chain without limits, soft or
// stretch: the same formulas (see the comments there), as selects.
template <class T>
void SolveLimbKernel(const LimbIn<T>& in, LimbOut<T>* out) {
  using Mask = decltype(T{} < T{});
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

  // 1. The mid joint's bend axis (unit, model space): the bones' normal in
  // a bent chain; in a straight one, towards the pole (pole x chain
  // direction), else any perpendicular of the chain (Eigen's
  // unitOrthogonal).
  const Vec<T> normal = Cross(ab, me);
  const T normal_sq = Dot(normal, normal);
  const Mask bent =
      (normal_sq > 1e-18 * ab_sq * me_sq) & (normal_sq > kTinySq);
  const Vec<T> start_end = in.tip - in.root;
  const T start_end_sq = Dot(start_end, start_end);
  const Mask has_start_end = start_end_sq > kTinySq;
  const Vec<T> chain_dir{Select(has_start_end, start_end.x, line.x),
                         Select(has_start_end, start_end.y, line.y),
                         Select(has_start_end, start_end.z, line.z)};
  const T chain_sq = Dot(chain_dir, chain_dir);
  const Vec<T> side_normal = Cross(pole_offset, chain_dir);
  const T side_sq = Dot(side_normal, side_normal);
  const Mask to_pole =
      in.has_pole & (side_sq > 1e-18 * scale_sq * chain_sq) & (side_sq > 0.0);
  const T ax = Select(chain_dir.x < 0.0, -chain_dir.x, chain_dir.x);
  const T ay = Select(chain_dir.y < 0.0, -chain_dir.y, chain_dir.y);
  const T az = Select(chain_dir.z < 0.0, -chain_dir.z, chain_dir.z);
  const T az_small = az * 1e-12;  // Eigen's isMuchSmallerThan(x, z).
  const Mask xy = (ax > az_small) | (ay > az_small);
  const T zero = Splat<T>(0.0);
  const Vec<T> any_normal{Select(xy, -chain_dir.y, zero),
                          Select(xy, chain_dir.x, -chain_dir.z),
                          Select(xy, zero, chain_dir.y)};
  ok &= bent | to_pole | (chain_sq > kTinySq);
  const Vec<T> axis_raw{
      Select(bent, normal.x, Select(to_pole, side_normal.x, any_normal.x)),
      Select(bent, normal.y, Select(to_pole, side_normal.y, any_normal.y)),
      Select(bent, normal.z, Select(to_pole, side_normal.z, any_normal.z))};
  const Vec<T> bend_axis = (1.0 / Sqrt(Dot(axis_raw, axis_raw))) * axis_raw;

  // The distance as a function of the turn (MidGeometry), then the turn
  // (Turns, ChooseFreeTurn).
  const Vec<T> me_par = Dot(me, bend_axis) * bend_axis;
  const Vec<T> me_perp = me - me_par;
  const Vec<T> me_side = Cross(bend_axis, me_perp);
  const T ga = Dot(ab, me_perp);
  const T gb = Dot(ab, me_side);
  const T r_sq = ga * ga + gb * gb;
  const T k = ab_sq + me_sq + 2.0 * Dot(ab, me_par);
  ok &= r_sq > 1e-24 * Max(Splat<T>(1.0), scale_sq * scale_sq);
  const T r = Sqrt(r_sq);
  const T h_free = 0.5 * (d_sq - k);
  const T h = Min(Max(h_free, -r), r);
  const T q = Select(Max(h_free, -h_free) >= r, Splat<T>(0.0),
                     Sqrt(Max(Splat<T>(0.0), r_sq - h * h)));
  const T inv_r_sq = 1.0 / r_sq;
  const T c0 = (ga * h - gb * q) * inv_r_sq;
  const T s0 = (gb * h + ga * q) * inv_r_sq;
  const T c1 = (ga * h + gb * q) * inv_r_sq;
  const T s1 = (gb * h - ga * q) * inv_r_sq;
  const Mask second = c1 > c0 + 1e-12;
  const T cos_turn = Select(second, c1, c0);
  const T sin_turn = Select(second, s1, s0);
  // The turn in the mid joint's frame (FromCosSin).
  const Vec<T> local_axis =
      ScaledRotate(Conjugate(in.mid_rotation), bend_axis);
  const T w = Sqrt(Max(Splat<T>(0.0), 0.5 * (1.0 + cos_turn)));
  const T far_half = Sqrt(Max(Splat<T>(0.0), 0.5 * (1.0 - cos_turn)));
  const T v = Select(w > 0.5, sin_turn / (2.0 * w),
                     Select(sin_turn < 0.0, -far_half, far_half));
  out->mid_local =
      in.mid_local * Quat<T>{w, v * local_axis.x, v * local_axis.y,
                             v * local_axis.z};
  const Vec<T> tip =
      in.mid + me_par + cos_turn * me_perp + sin_turn * me_side;

  // 2. The root's aim at the target, unnormalised (ScaledAim).
  const Vec<T> from = tip - in.root;
  const T ff = Dot(from, from);
  ok &= ff > kTinySq;
  const T ft = Sqrt(ff * d_sq);
  const T inv_ft = 1.0 / ft;
  const Vec<T> c = inv_ft * Cross(from, line);
  const Quat<T> aim{(ft + Dot(from, line)) * inv_ft, c.x, c.y, c.z};
  const T aim_sq = aim.w * aim.w + aim.x * aim.x + aim.y * aim.y +
                   aim.z * aim.z;
  ok &= aim_sq >= 1e-30;

  // 3. The twist about the line towards the pole.
  const T inv_line_sq = 1.0 / d_sq;
  const Vec<T> pole_dir =
      pole_offset - (Dot(pole_offset, line) * inv_line_sq) * line;
  const Mask use_pole =
      in.has_pole & (Dot(pole_dir, pole_dir) > 1e-18 * scale_sq);
  const Vec<T> turned = ScaledRotate(aim, ab);
  const Vec<T> bend_dir = turned - (Dot(turned, line) * inv_line_sq) * line;
  const T mid_sq = Dot(bend_dir, bend_dir);
  const T aim_sq_sq = aim_sq * aim_sq;
  // A chain straight after its bend: the side a positive bend would take.
  const Mask straight =
      mid_sq <= 1e-18 * Max(ab_sq, Splat<T>(kTinySq)) * aim_sq_sq;
  const Vec<T> side_turned = Cross(line, ScaledRotate(aim, bend_axis));
  const Vec<T> side_dir =
      side_turned - (Dot(side_turned, line) * inv_line_sq) * line;
  const Vec<T> mid_dir{Select(straight, side_dir.x, bend_dir.x),
                       Select(straight, side_dir.y, bend_dir.y),
                       Select(straight, side_dir.z, bend_dir.z)};
  const Mask twisted =
      use_pole & (Dot(mid_dir, mid_dir) > kTinySq * aim_sq_sq);
  const T cos_part = Dot(mid_dir, pole_dir);
  const T sin_part = Dot(line, Cross(mid_dir, pole_dir));
  const T rr = Sqrt(cos_part * cos_part + sin_part * sin_part * inv_line_sq);
  const T axis_scale = sin_part * inv_line_sq;
  const Mask not_opposite = rr + cos_part > 1e-15 * rr;
  const Quat<T> twist{
      Select(twisted, Select(not_opposite, rr + cos_part, zero),
             Splat<T>(1.0)),
      Select(twisted, Select(not_opposite, axis_scale * line.x, line.x), zero),
      Select(twisted, Select(not_opposite, axis_scale * line.y, line.y), zero),
      Select(twisted, Select(not_opposite, axis_scale * line.z, line.z),
             zero)};

  // The root's new local rotation, normalised once.
  Quat<T> root = Conjugate(in.parent) * (twist * aim) * in.root_rotation;
  const T inv_norm = 1.0 / Sqrt(root.w * root.w + root.x * root.x +
                                root.y * root.y + root.z * root.z);
  out->root_local = {root.w * inv_norm, root.x * inv_norm, root.y * inv_norm,
                     root.z * inv_norm};
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
