#include "solvers/transform.h"

#include <cmath>

namespace reach {

Eigen::Quaterniond SmallestRotation(const Eigen::Vector3d& from,
                                    const Eigen::Vector3d& to,
                                    double min_length) {
  double from_sq = from.squaredNorm();
  double to_sq = to.squaredNorm();
  Eigen::Vector3d a = from;
  Eigen::Vector3d b = to;
  if (!std::isfinite(from_sq) || !std::isfinite(to_sq)) {
    // Overflowing squares (|v| > ~1e154) or non-finite input: rescale by the
    // largest component first; a non-finite vector has no direction.
    if (!from.allFinite() || !to.allFinite()) {
      return Eigen::Quaterniond::Identity();
    }
    a = from / from.cwiseAbs().maxCoeff();
    b = to / to.cwiseAbs().maxCoeff();
    from_sq = a.squaredNorm();
    to_sq = b.squaredNorm();
    min_length = 0.0;
  }
  const double min_sq = min_length * min_length;
  if (!(from_sq > min_sq) || !(to_sq > min_sq)) {
    return Eigen::Quaterniond::Identity();
  }
  // Half-angle form: for unit a and b, q = (1 + a.b, a x b) normalised is
  // the rotation by the angle between them about a x b. The two lengths are
  // independent (they overlap in the pipeline), and unit vectors keep
  // products in range.
  a *= 1.0 / std::sqrt(from_sq);
  b *= 1.0 / std::sqrt(to_sq);
  const Eigen::Vector3d c = a.cross(b);
  Eigen::Quaterniond q(1.0 + a.dot(b), c.x(), c.y(), c.z());
  // Nearly opposite vectors still give an accurate (1 + a.b, a x b): its
  // cross part keeps the axis down to |a x b| ~ 1e-15. Only an exactly
  // opposite pair leaves nothing: a half turn about any perpendicular axis.
  if (q.squaredNorm() < 1e-30) {
    const Eigen::Vector3d axis = a.unitOrthogonal();
    return Eigen::Quaterniond(0.0, axis.x(), axis.y(), axis.z());
  }
  q.normalize();
  return q;
}

Eigen::Vector3d RotationVector(const Eigen::Quaterniond& q_in) {
  // Take the short way round (w >= 0) so the angle is in [0, pi].
  const Eigen::Quaterniond q =
      q_in.w() < 0.0 ? Eigen::Quaterniond(-q_in.coeffs()) : q_in;
  const double s = q.vec().norm();
  if (s < 1e-12) return 2.0 * q.vec();  // first order: angle ~= 2 * |vec|
  const double angle = 2.0 * std::atan2(s, q.w());
  return q.vec() * (angle / s);
}

Eigen::Quaterniond FromRotationVector(const Eigen::Vector3d& v) {
  const double angle = v.norm();
  if (angle < 1e-12) {
    Eigen::Quaterniond q(1.0, 0.5 * v.x(), 0.5 * v.y(), 0.5 * v.z());
    q.normalize();
    return q;
  }
  const double half = 0.5 * angle;
  const double s = std::sin(half) / angle;
  return Eigen::Quaterniond(std::cos(half), s * v.x(), s * v.y(), s * v.z());
}

double SwingTwist(const Eigen::Quaterniond& q, const Eigen::Vector3d& axis,
                  Eigen::Quaterniond* swing) {
  // The twist is q's projection onto rotations about `axis`: keep w and the
  // vector part along the axis (Dobrowolski 2015, "Swing-twist decomposition
  // in Clifford algebra").
  const double p = q.vec().dot(axis);
  const double n = std::sqrt(q.w() * q.w() + p * p);
  if (n < 1e-12) {
    // A half turn about an axis perpendicular to `axis`: no twist.
    *swing = q;
    return 0.0;
  }
  const Eigen::Quaterniond twist(q.w() / n, axis.x() * p / n, axis.y() * p / n,
                                 axis.z() * p / n);
  *swing = q * twist.conjugate();
  return 2.0 * std::atan2(p, q.w());
}

}  // namespace reach
