// Rigid transform with uniform scale, and the small rotation helpers every
// solver shares.
//
// Conventions (DESIGN.md): double precision, right-handed, quaternions are
// unit (w, x, y, z). A transform maps a point p of the child frame to
// `translation + scale * (rotation * p)` in the parent frame.
#ifndef REACH_SOLVERS_TRANSFORM_H_
#define REACH_SOLVERS_TRANSFORM_H_

#include <Eigen/Core>
#include <Eigen/Geometry>
#include <cmath>

namespace reach {

// v turned by the unit quaternion q: v + 2w (u x v) + 2 u x (u x v) with
// u = q.vec(). Eigen's operator* computes the same but is not inlined in
// the solvers' loops, and forward kinematics does little else.
inline Eigen::Vector3d RotateVector(const Eigen::Quaterniond& q,
                                    const Eigen::Vector3d& v) {
  const double x = q.x(), y = q.y(), z = q.z(), w = q.w();
  const double tx = 2.0 * (y * v.z() - z * v.y());
  const double ty = 2.0 * (z * v.x() - x * v.z());
  const double tz = 2.0 * (x * v.y() - y * v.x());
  return Eigen::Vector3d(v.x() + w * tx + (y * tz - z * ty),
                         v.y() + w * ty + (z * tx - x * tz),
                         v.z() + w * tz + (x * ty - y * tx));
}

// A similarity transform: rotation, then uniform scale, then translation.
// Uniform scale keeps composed transforms free of shear, so every global
// joint frame has a well-defined rotation (non-uniform scale is rejected at
// the skeleton's boundary).
struct Transform {
  // Rotation first: the 16-byte aligned quaternion, then the translation
  // and the scale fill 64 bytes with no padding (a cache line).
  Eigen::Quaterniond rotation = Eigen::Quaterniond::Identity();
  Eigen::Vector3d translation = Eigen::Vector3d::Zero();
  double scale = 1.0;  // > 0

  static Transform Identity() { return Transform(); }

  // Maps a point of this frame into the parent frame.
  Eigen::Vector3d operator*(const Eigen::Vector3d& point) const {
    return translation + scale * RotateVector(rotation, point);
  }

  // Composition: (this * child) maps child-frame points into this transform's
  // parent frame.
  Transform operator*(const Transform& child) const {
    Transform out;
    out.translation = *this * child.translation;
    out.rotation = rotation * child.rotation;
    out.scale = scale * child.scale;
    return out;
  }

  Transform Inverse() const {
    Transform out;
    out.rotation = rotation.conjugate();
    out.scale = 1.0 / scale;
    out.translation = -(out.scale * (out.rotation * translation));
    return out;
  }
};

// Angle in [0, pi] of the rotation taking `a` to `b` (both unit). Uses atan2
// of the relative rotation's parts: acos of the dot product would lose half
// the digits near zero (a resolution of ~3e-8 rad).
inline double AngleBetween(const Eigen::Quaterniond& a,
                           const Eigen::Quaterniond& b) {
  const Eigen::Quaterniond d = a.conjugate() * b;
  return 2.0 * std::atan2(d.vec().norm(), std::abs(d.w()));
}

// Rotation about a unit axis by `angle_rad`.
inline Eigen::Quaterniond AxisAngle(const Eigen::Vector3d& unit_axis,
                                    double angle_rad) {
  const double half = 0.5 * angle_rad;
  const double s = std::sin(half);
  return Eigen::Quaterniond(std::cos(half), s * unit_axis.x(),
                            s * unit_axis.y(), s * unit_axis.z());
}

// The smallest rotation taking direction `from` to direction `to`. Unlike
// Eigen's FromTwoVectors this never returns a non-unit quaternion: when either
// vector is shorter than `min_length` the identity is returned.
Eigen::Quaterniond SmallestRotation(const Eigen::Vector3d& from,
                                    const Eigen::Vector3d& to,
                                    double min_length = 1e-12);

// Rotation vector (axis * angle, angle in [0, pi]) of a unit quaternion: the
// logarithm map. Used for orientation errors.
Eigen::Vector3d RotationVector(const Eigen::Quaterniond& q);

// Unit quaternion exp(v): rotation about v/|v| by |v| radians.
Eigen::Quaterniond FromRotationVector(const Eigen::Vector3d& v);

// Swing-twist decomposition about the unit axis `axis`: q = swing * twist,
// where twist rotates about `axis` and swing about an axis perpendicular to
// it. Returns the signed twist angle in (-2pi, 2pi] (the quaternion's sign is
// kept, so angles beyond pi survive, as hinge joints need) and writes the
// swing rotation.
double SwingTwist(const Eigen::Quaterniond& q, const Eigen::Vector3d& axis,
                  Eigen::Quaterniond* swing);

}  // namespace reach

#endif  // REACH_SOLVERS_TRANSFORM_H_
