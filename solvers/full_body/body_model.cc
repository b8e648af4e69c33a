#include "solvers/full_body/body_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "solvers/full_body.h"

namespace reach {
namespace {

using Eigen::Quaterniond;
using Eigen::Vector3d;

// Model-space transforms of a pose, each computed when first asked for
// (with its ancestors): the pass needs a dozen joints of a rig that may
// have hundreds.
class LazyGlobals {
 public:
  LazyGlobals(const Skeleton& skeleton, const Pose& pose,
              std::vector<Transform>& globals, std::vector<char>& known)
      : skeleton_(skeleton), pose_(pose), globals_(globals), known_(known) {
    globals_.resize(skeleton.num_joints());
    Reset();
  }
  // After the pose changed.
  void Reset() { known_.assign(skeleton_.num_joints(), 0); }
  const Transform& operator[](int j) {
    if (!known_[j]) {
      const int parent = skeleton_.joint(j).parent;
      globals_[j] =
          parent < 0 ? pose_.local[j] : (*this)[parent] * pose_.local[j];
      known_[j] = 1;
    }
    return globals_[j];
  }

 private:
  const Skeleton& skeleton_;
  const Pose& pose_;
  std::vector<Transform>& globals_;
  std::vector<char>& known_;
};

// `v` without its part along unit `up`.
Vector3d Flat(const Vector3d& v, const Vector3d& up) {
  return v - v.dot(up) * up;
}

// How far beyond its ankle's cone a leg's shin must tilt for its hip
// socket to be at `socket` over its ankle at `ankle`, the foot turned by
// `foot` (radians; <= 0 within it): the knee lies on a cone about the
// ankle-to-socket line (the two bones' lengths fix its half-angle), and
// the nearest of its directions to the shin's rest direction over the foot
// is that half-angle less the line's own angle from it. 0 where the leg
// is straight or folded beyond its bones (the reach is judged elsewhere).
// The ankle's cone bounds the foot's axis (heel to toe) against the shin:
// a flexion (the shin tilting about the axis across the foot) swings it
// as far, so the cone is read as the shin's tilt. A lean to the side turns
// the foot about its own axis instead, which the ankle's twist range
// bounds, not its cone: there the reading is stricter than the joint.
double AnkleExcess(const BodyModel& model, int side, const Vector3d& socket,
                   const Vector3d& ankle, const Quaterniond& foot) {
  const double cone = model.ankle_cone[side];
  const double shin = model.shin_length[side];
  const double thigh = model.thigh_length[side];
  const Vector3d line = socket - ankle;
  const double d = line.norm();
  if (!std::isfinite(cone) || !(d < shin + thigh) ||
      !(d > std::abs(shin - thigh))) {
    return 0.0;
  }
  const double along = (shin * shin - thigh * thigh + d * d) / (2.0 * d);
  const double half = std::acos(std::clamp(along / shin, -1.0, 1.0));
  const Vector3d rest = foot * model.shin_in_foot[side];
  const double off =
      std::atan2(line.cross(rest).norm(), line.dot(rest));
  return std::abs(half - off) - cone;
}

// The unit model axis nearest `v` (zero when `v` is zero).
Vector3d NearestAxis(const Vector3d& v) {
  Eigen::Index axis = 0;
  v.cwiseAbs().maxCoeff(&axis);
  Vector3d out = Vector3d::Zero();
  if (v[axis] != 0.0) out[axis] = v[axis] > 0.0 ? 1.0 : -1.0;
  return out;
}

// Gives goal `i` (on a foot or hand) a preferred bend toward `direction`
// from its limb's middle joint `mid`, its limb starting at `limb_root`,
// unless it has a pole or names another limb.
void PreferBend(const Skeleton& skeleton, int limb_root, const Vector3d& mid,
                const Vector3d& direction, double length, Goal& goal,
                double& cone) {
  if (goal.pole || goal.aim_axis) return;
  if (goal.chain >= 0 || goal.root_joint >= 0) {
    if (LimbRootOf(skeleton, goal) != limb_root) {
      if (goal.root_joint >= 0) return;  // The caller's limb.
      goal.tip_joint = EffectorOf(skeleton, goal);
      goal.chain = -1;
      goal.root_joint = limb_root;
    }
  } else if (LimbRootOf(skeleton, goal) != limb_root) {
    goal.root_joint = limb_root;
  }
  goal.pole = mid + length * direction;
  cone = kPreferredBendCone;
}

// A full-body goal of the body model's on `joint`.
Goal BodyGoal(int joint, const Vector3d& target, int priority) {
  Goal goal;
  goal.solver = SolverKind::kFullBody;
  goal.tip_joint = joint;
  goal.target = target;
  goal.priority = priority;
  return goal;
}

// Length of the rest pose's path from `ancestor` down to `j`.
double PathLength(const Skeleton& skeleton, int ancestor, int j) {
  const absl::Span<const Transform> at = skeleton.rest_globals();
  double length = 0.0;
  for (; j >= 0 && j != ancestor; j = skeleton.joint(j).parent) {
    const int parent = skeleton.joint(j).parent;
    if (parent < 0) break;
    length += (at[j].translation - at[parent].translation).norm();
  }
  return length;
}

// A clavicle's stiffness while its hand's target is within the arm's
// reach, and how far beyond reach (arm lengths) it is back to its role's.
// The performers' clavicles turn 0-7 degrees a second; at 0.9 the solved
// ones turned 13-40, and 0.97 over a ramp of a tenth of an arm stalled a
// BCN gameplay stream whose hands were just beyond reach (the shoulder
// girdle they needed nearly still): 0.97 over 0.02 moves them 6-20
// degrees a second (full_body_motion_bench: rows over the spine bar 24 ->
// 20).
constexpr double kStillClavicle = 0.97;
constexpr double kClavicleFreeBeyond = 0.02;

// Over how much of a leg's length above the other foot a raised foot's
// say in the heading fades to nothing.
constexpr double kRaisedFootFade = 0.25;

// The heading's cues (AddBodyGoals): a line across the feet or the hands
// shorter than this many leg lengths says less, in proportion (between
// close points its direction turns far for a small move of either).
constexpr double kSureLine = 0.5;

// Sparse trackers (FullBodyOptions::plant_feet): a foot no goal places
// stands where it is while it is within its stance region about its home
// (under its hip socket where the pelvis pass puts the hips): kStepReach
// leg lengths forward and back, kStepWide out to its side (people stand
// wide), kStepNarrow in across the body (no one stands crossed). Outside
// it, as the body leaves it, it steps home, one foot at a time, the other
// standing.
constexpr double kStepReach = 0.3;
constexpr double kStepWide = 0.5;
constexpr double kStepNarrow = 0.15;
// ... or when its hip socket, where it goes and this share of a leg lower,
// would be further from it than the leg reaches.
constexpr double kStepSink = 0.03;
// A stepping foot covers, per solve, this many times the distance its
// home moved in that solve (a walker's swinging foot moves at 2-3 times
// the body's speed), and at least kStepSettle of what remains (so a step
// begun ends when the body stops), raised kStepLift leg lengths at most,
// kStepRaised plus half the distance left, and lands kStepLead of
// kStepReach ahead of home along the way home moves (a walker's foot
// lands ahead of the hip). A foot more than kStepRaised legs above the
// other is in a step.
constexpr double kStepSpeed = 2.5;
constexpr double kStepSettle = 0.25;
constexpr double kStepLift = 0.1;
constexpr double kStepLead = 0.8;
constexpr double kStepRaised = 0.02;

// The share of the body's mass that moves along with the pelvis (most
// of the trunk and the thighs, a little of the arms).
constexpr double kMovesWithPelvis = 0.6;

// The most the trunk leans forward about the shoulders so that legs whose
// ankles cannot tilt the shins further still reach the pelvis (a person's
// deep squat leans the trunk 40-50 degrees): 60 degrees, radians.
constexpr double kMostLean = M_PI / 3.0;

// Segment masses as shares of the body's (de Leva 1996, "Adjustments to
// Zatsiorsky-Seluyanov's segment inertia parameters", J. Biomech. 29(9),
// male), each at its segment's centre of mass.
struct SegmentMasses {
  double head = 0.0694;
  double trunk = 0.4346;  // Centre halfway from pelvis to shoulders.
  double upper_arm = 0.0271, forearm = 0.0162, hand = 0.0061;
  double thigh = 0.1416, shank = 0.0433, foot = 0.0137;
  double thigh_centre = 0.4095;  // From the hip toward the knee.
  double shank_centre = 0.4459;  // From the knee toward the ankle.
};

// What the balance of a body standing on both feet needs from the pelvis
// pass.
struct BalanceInput {
  Vector3d up, forward;  // Unit; forward is the heading (knees bend there).
  Vector3d head;
  std::array<Vector3d, 2> hands, feet, sockets;  // Sockets: from the pelvis.
};

// The centre of mass of a body whose pelvis is at `pelvis`, its trunk
// straight to the head, each arm straight from its shoulder to its hand
// (elbow halfway) and each leg bent forward from its socket to its foot.
Vector3d CentreOfMass(const BodyModel& model, const BalanceInput& in,
                      const Vector3d& pelvis) {
  const SegmentMasses m;
  const Vector3d trunk = in.head - pelvis;
  Vector3d c = m.head * in.head;
  for (int side = 0; side < 2; ++side) {
    const Vector3d shoulder =
        pelvis + (model.shoulder_height[side] / model.trunk_height) * trunk;
    c += 0.5 * m.trunk * 0.5 * (pelvis + shoulder);  // Half the trunk.
    const Vector3d& hand = in.hands[side];
    c += m.upper_arm * (0.75 * shoulder + 0.25 * hand) +
         m.forearm * (0.25 * shoulder + 0.75 * hand) + m.hand * hand;
    const Vector3d hip = pelvis + in.sockets[side];
    const Vector3d& foot = in.feet[side];
    const Vector3d line = foot - hip;
    const double d = line.norm();
    Vector3d knee = 0.5 * (hip + foot);
    if (d > 1e-12) {
      const double a = model.thigh_length[side], b = model.shin_length[side];
      const Vector3d dir = line / d;
      const double x = std::clamp((a * a - b * b + d * d) / (2.0 * d), 0.0, a);
      Vector3d bend = in.forward - in.forward.dot(dir) * dir;
      if (bend.norm() > 1e-9) bend.normalize();
      knee = hip + x * dir + std::sqrt(std::max(0.0, a * a - x * x)) * bend;
    }
    c += m.thigh * (hip + m.thigh_centre * (knee - hip)) +
         m.shank * (knee + m.shank_centre * (foot - knee)) + m.foot * foot;
  }
  return c;
}

// How far (along the floor, a vector) the centre of mass `com` lies outside
// the base of support of two standing feet: each a disc of half a foot's
// length about the foot's middle (a quarter of a foot in front of the
// ankle), and the area between them. Zero inside.
Vector3d OutsideSupport(const BodyModel& model, const BalanceInput& in,
                        const Vector3d& com) {
  // A foot is about 15% of the standing height, the ankle near its back.
  const double foot = 0.15 * model.height;
  const double radius = 0.5 * foot;
  const Vector3d a = Flat(in.feet[0], in.up) + 0.25 * foot * in.forward;
  const Vector3d ab = Flat(in.feet[1], in.up) + 0.25 * foot * in.forward - a;
  const Vector3d c = Flat(com, in.up);
  const double t =
      ab.squaredNorm() > 0.0
          ? std::clamp((c - a).dot(ab) / ab.squaredNorm(), 0.0, 1.0)
          : 0.0;
  const Vector3d away = c - (a + t * ab);
  const double distance = away.norm();
  if (distance <= radius) return Vector3d::Zero();
  return (1.0 - radius / distance) * away;
}

// Sparse trackers: where each foot no goal places (not `placed`) stands
// after this solve, in `feet` and `stands` (on entry where the start pose
// has it). Its home is under its hip socket where the pelvis goes (from
// `pelvis_from` to `pelvis_to`, along the floor, turned by `spin`). A
// foot stands anywhere in its stance region about home (kStepReach legs
// forward and back, kStepWide out to its side, kStepNarrow in across the
// body); one outside it, home moving away, steps; a raised one (mid-step)
// goes on. It steps to home, led along the way home moves, one foot at a
// time while the other stands (the one furthest outside its region first); a step
// covers kStepSpeed times home's move, at least kStepSettle of what
// remains, and lifts the foot at most kStepLift legs, half the distance
// left; the foot turns to the heading as it goes.
void StepFeet(const BodyModel& model, const Vector3d& up,
              const Vector3d& heading, const Vector3d& pelvis_from,
              const Vector3d& pelvis_to, const Quaterniond& spin,
              const std::array<Vector3d, 2>& sockets,
              const std::array<bool, 2>& placed, double plant_height,
              double pelvis_lowest, std::array<Vector3d, 2>& feet,
              std::array<Quaterniond, 2>& stands) {
  const double leg = model.leg_length[0];
  const Vector3d forward = Flat(heading, up);
  if (!(leg > 0.0) || !(forward.norm() > 1e-9)) return;
  const Vector3d ahead = forward.normalized();
  // The floor: the caller's, else the lower foot's height.
  const bool has_floor = !std::isnan(plant_height);
  const double floor = has_floor
                           ? plant_height
                           : std::min(feet[0].dot(up), feet[1].dot(up));
  // A foot more than this above the lower one is in a step (a stance's
  // feet differ by up to 1.5% of a leg on the CMU clips; a stepping foot
  // stays above it until it lands).
  const double raised_above = kStepRaised * leg;
  // How far a foot `above` its ground comes down in a solve over a floor
  // the caller gives: `speed`, at least kStepSettle of the height left, and
  // the rest once what would be left is within raised_above (it lands).
  auto drop = [&](double above, double speed) {
    const double d = std::max(speed, kStepSettle * above);
    return above - d < raised_above ? above : d;
  };
  // Where each foot stands: on the floor, or with a floor given and a
  // head that holds the pelvis higher than the legs reach down to it (a
  // jump), as low as its leg reaches from there (kStepSink short of
  // straight); a foot below that rises with the body.
  std::array<double, 2> ground{floor, floor};
  if (has_floor && std::isfinite(pelvis_lowest)) {
    for (int side = 0; side < 2; ++side) {
      ground[side] = std::max(floor, pelvis_lowest + sockets[side].dot(up) -
                                         (1.0 - kStepSink) * leg);
      const double below = ground[side] - feet[side].dot(up);
      if (!placed[side] && below > 0.0) feet[side] += below * up;
    }
  }
  std::array<Vector3d, 2> aim;
  std::array<double, 2> outside{0.0, 0.0}, moved{0.0, 0.0};
  std::array<bool, 2> raised{false, false}, leaving{false, false};
  for (int side = 0; side < 2; ++side) {
    const Vector3d at = Flat(feet[side], up);
    const Vector3d from = Flat(pelvis_from + sockets[side], up);
    const Vector3d socket = Flat(spin * sockets[side], up);
    const Vector3d home = Flat(pelvis_to, up) + socket;
    const Vector3d way = home - from;
    moved[side] = way.norm();
    // Out: from the pelvis to this side's socket, square to the heading.
    Vector3d out = socket - socket.dot(ahead) * ahead;
    if (!(out.norm() > 1e-9)) out = (side == 0 ? 1.0 : -1.0) * up.cross(ahead);
    out.normalize();
    const Vector3d rel = at - home;
    const double along = rel.dot(ahead), wide = rel.dot(out);
    outside[side] = std::hypot(
        along / (kStepReach * leg),
        wide / ((wide > 0.0 ? kStepWide : kStepNarrow) * leg));
    // Or beyond the leg's reach from where the hip goes, at its height now
    // lowered kStepSink of a leg (straight legs under the hips reach
    // hardly any way along the floor without the hips sinking).
    const Vector3d hip =
        home + ((pelvis_from + sockets[side]).dot(up) - kStepSink * leg) * up;
    outside[side] = std::max(outside[side], (hip - feet[side]).norm() / leg);
    // The lead fades in over a hundredth of a leg of move (a body barely
    // moving has no direction to lead along).
    const double lead =
        kStepLead * kStepReach * leg * std::min(1.0, moved[side] / (1e-2 * leg));
    aim[side] = moved[side] > 0.0 ? home + lead * way / moved[side] : home;
    leaving[side] = (home - at).norm() > (from - at).norm();
    raised[side] =
        !placed[side] && feet[side].dot(up) - ground[side] > raised_above;
  }
  // Which foot steps: a raised one goes on; else the one furthest outside
  // its region as home leaves it, if the other stands on the floor or a
  // goal.
  int stepping = -1;
  for (int side = 0; side < 2; ++side) {
    if (raised[side]) stepping = side;
  }
  if (stepping < 0) {
    double furthest = 1.0;
    for (int side = 0; side < 2; ++side) {
      if (placed[side] || raised[1 - side] || !leaving[side]) continue;
      if (outside[side] > furthest) {
        furthest = outside[side];
        stepping = side;
      }
    }
  }
  // With a floor given, a raised foot that does not step comes straight
  // down (both feet of a landing).
  if (has_floor) {
    for (int other = 0; other < 2; ++other) {
      if (other == stepping || !raised[other]) continue;
      feet[other] -= drop(feet[other].dot(up) - ground[other], 0.0) * up;
    }
  }
  if (stepping < 0) return;
  const int side = stepping;
  const Vector3d at = Flat(feet[side], up);
  const double d = (aim[side] - at).norm();
  double advance =
      std::min(d, std::max(kStepSpeed * moved[side], kStepSettle * d));
  if (d - advance < raised_above) advance = d;  // It lands.
  const double share = d > 0.0 ? advance / d : 1.0;
  const Vector3d next = at + share * (aim[side] - at);
  const double left = d - advance;
  double lift =
      left > 0.0 ? std::min(kStepLift * leg, raised_above + 0.5 * left) : 0.0;
  // A foot higher than its step lifts it (one the body carried up, over a
  // floor the caller gives) comes down as a step moves along: kStepSpeed
  // times home's move. (A step's lift is 0 or more than raised_above.)
  const double above = feet[side].dot(up) - ground[side];
  if (has_floor && above > lift) {
    lift = std::max(lift, above - drop(above, kStepSpeed * moved[side]));
  }
  feet[side] = next + (ground[side] + lift) * up;
  // Turned about up toward the heading by the same share.
  const Vector3d toe = Flat(stands[side] * model.foot_forward[side], up);
  if (toe.norm() > 1e-9) {
    const double angle = std::atan2(up.dot(toe.normalized().cross(ahead)),
                                    toe.normalized().dot(ahead));
    stands[side] =
        (Quaterniond(Eigen::AngleAxisd(share * angle, up)) * stands[side])
            .normalized();
  }
}

}  // namespace

BodyModel BuildBodyModel(const Skeleton& skeleton, const RoleStiffness& roles) {
  BodyModel model;
  const int n = skeleton.num_joints();
  model.stiffness.resize(n);
  model.fixed.assign(n, 0);
  for (int j = 0; j < n; ++j) model.stiffness[j] = skeleton.joint(j).stiffness;
  model.reach.assign(n, 0.0);
  for (int j = 0; j < n; ++j) {
    const int parent = skeleton.joint(j).parent;
    if (parent < 0) continue;
    model.reach[j] =
        model.reach[parent] + (skeleton.rest_globals()[j].translation -
                               skeleton.rest_globals()[parent].translation)
                                  .norm();
  }
  const absl::StatusOr<Characterization> found = Characterize(skeleton);
  if (!found.ok()) return model;
  const Characterization& c = *found;
  for (int side = 0; side < 2; ++side) {
    const Leg& leg = c.legs[side];
    const Arm& arm = c.arms[side];
    if (leg.thigh < 0 || leg.shin < 0 || leg.foot < 0 || arm.upper_arm < 0 ||
        arm.forearm < 0 || arm.hand < 0) {
      return model;
    }
  }
  if (c.pelvis < 0 || c.head < 0 || c.spine.empty()) return model;
  model.human = true;
  model.pelvis = c.pelvis;
  model.head = c.head;
  model.arms = c.arms;
  model.legs = c.legs;

  // Stiffness by role, where the skeleton sets none.
  auto stiffen = [&](int j, double s) {
    if (j >= 0 && skeleton.joint(j).stiffness == 0.0) model.stiffness[j] = s;
  };
  for (int j : c.spine) stiffen(j, roles.spine);
  for (int j : c.neck) stiffen(j, roles.neck);
  stiffen(c.pelvis, roles.pelvis);
  for (const Arm& arm : c.arms) stiffen(arm.clavicle, roles.clavicle);

  const absl::Span<const Transform> rest = skeleton.rest_globals();
  const Vector3d rest_trunk =
      rest[c.head].translation - rest[c.pelvis].translation;
  constexpr double kCos45 = 0.7071067811865476;
  model.rest_stands =
      rest_trunk.norm() > 1e-9 && rest_trunk.normalized().dot(c.up) > kCos45;
  model.hinge_axis.assign(n, Vector3d::Zero());
  model.hinge_straight.assign(n, 0.0);
  if (model.rest_stands) {
    // The posture: each relaxed joint, the joint its bone ends at, and the
    // direction a standing body points that bone.
    auto relax = [&](int j, int end, const Vector3d& natural) {
      if (j < 0 || end < 0) return;
      const Joint& joint = skeleton.joint(j);
      // A joint the rig limits keeps to its limits (on the limited
      // humanoid, drawing its spine stalled a VR crouch stream's hands).
      if (joint.type != JointType::kBall || joint.IsLimited()) return;
      const Vector3d bone = rest[end].translation - rest[j].translation;
      Quaterniond to = joint.rest.rotation;
      if (bone.norm() > 1e-9 && bone.normalized().dot(natural) < kCos45) {
        const Quaterniond p = joint.parent >= 0 ? rest[joint.parent].rotation
                                                : Quaterniond::Identity();
        const Quaterniond swing =
            Quaterniond::FromTwoVectors(bone.normalized(), natural);
        to = (p.conjugate() * swing * p * to).normalized();
      }
      model.relax.push_back(j);
      model.relax_to.push_back(to);
    };
    std::vector<int> trunk = c.spine;
    for (int j : c.neck) trunk.push_back(j);
    trunk.push_back(c.head);
    for (size_t k = 0; k + 1 < trunk.size(); ++k) {
      relax(trunk[k], trunk[k + 1], c.up);
    }
    relax(c.arms[kLeft].clavicle, c.arms[kLeft].upper_arm, c.left);
    relax(c.arms[kRight].clavicle, c.arms[kRight].upper_arm, -c.left);

    // The anatomical hinges.
    auto hinge = [&](int root, int mid, int end, const Vector3d& flex) {
      if (root < 0 || mid < 0 || end < 0) return;
      const Joint& joint = skeleton.joint(mid);
      if (joint.type != JointType::kBall || joint.IsLimited()) return;
      const Vector3d upper = rest[mid].translation - rest[root].translation;
      const Vector3d lower = rest[end].translation - rest[mid].translation;
      if (!(upper.norm() > 1e-9) || !(lower.norm() > 1e-9)) return;
      // Bent at rest by more than about 6 degrees: that bend's axis, and
      // straight is that bend undone.
      Vector3d axis = upper.normalized().cross(lower.normalized());
      if (axis.norm() > 0.1) {
        model.hinge_straight[mid] = -std::atan2(
            axis.norm(), upper.normalized().dot(lower.normalized()));
      } else {
        axis = lower.normalized().cross(flex);
        if (!(axis.norm() > 0.1)) return;
      }
      model.hinge_axis[mid] =
          (rest[mid].rotation.conjugate() * axis.normalized()).normalized();
    };
    for (int side = 0; side < 2; ++side) {
      const Arm& arm = c.arms[side];
      hinge(arm.upper_arm, arm.forearm, arm.hand, c.forward);
      const Leg& leg = c.legs[side];
      hinge(leg.thigh, leg.shin, leg.foot, -c.forward);
    }
  }

  // Pelvis helpers: joints strictly between the pelvis and one thigh
  // whose subtree holds that leg only. A joint above both legs (a
  // Character Creator rig's CC_Base_Pelvis, BCN's B_LowerPelvis) keeps the
  // sockets together and stays as the skeleton has it. (Made as stiff as
  // the spine, it took the Character Creator clip's MPJPE from 10.5 to
  // 10.2 cm but stalled a reachable pelvis-point goal of the gameplay
  // stream on BCN at 2x its tolerance.)
  for (int side = 0; side < 2; ++side) {
    const int other = c.legs[1 - side].thigh;
    for (int j = skeleton.joint(c.legs[side].thigh).parent;
         j >= 0 && j != c.pelvis; j = skeleton.joint(j).parent) {
      bool holds_other = false;
      for (int k = other; k >= 0; k = skeleton.joint(k).parent) {
        if (k == j) holds_other = true;
      }
      if (!holds_other) model.fixed[j] = 1;
    }
  }

  const absl::Span<const Transform> at = skeleton.rest_globals();
  for (int side = 0; side < 2; ++side) {
    model.leg_length[side] =
        PathLength(skeleton, c.legs[side].thigh, c.legs[side].foot);
    model.thigh_length[side] =
        PathLength(skeleton, c.legs[side].thigh, c.legs[side].shin);
    model.shin_length[side] =
        PathLength(skeleton, c.legs[side].shin, c.legs[side].foot);
    model.arm_length[side] =
        PathLength(skeleton, c.arms[side].upper_arm, c.arms[side].hand);
    model.foot_forward[side] =
        at[c.legs[side].foot].rotation.conjugate() * c.forward;
    const Vector3d shin =
        at[c.legs[side].shin].translation - at[c.legs[side].foot].translation;
    if (shin.norm() > 0.0) {
      model.shin_in_foot[side] =
          at[c.legs[side].foot].rotation.conjugate() * shin.normalized();
    }
    const Joint& ankle = skeleton.joint(c.legs[side].foot);
    if (ankle.type == JointType::kBall) {
      model.ankle_cone[side] = ankle.max_swing_rad;
    }
  }
  const double trunk_length = PathLength(skeleton, c.pelvis, c.head);
  for (int side = 0; side < 2; ++side) {
    const int shoulder = c.arms[side].upper_arm;
    const double path = PathLength(skeleton, c.pelvis, shoulder);
    model.shoulder_height[side] =
        (at[shoulder].translation - at[c.pelvis].translation).dot(c.up);
    if (!(model.shoulder_height[side] > 0.5 * path)) {
      model.shoulder_height[side] = 0.95 * path;
    }
  }
  model.trunk_height =
      (at[c.head].translation - at[c.pelvis].translation).dot(c.up);
  if (!(model.trunk_height > 0.5 * trunk_length)) {
    model.trunk_height = 0.95 * trunk_length;
  }
  model.height =
      (at[c.head].translation - at[c.legs[0].foot].translation).dot(c.up);
  model.pelvis_forward = at[c.pelvis].rotation.conjugate() * c.forward;
  model.hips = c.legs[0].thigh;
  for (bool above = false; !above && model.hips >= 0;) {
    for (int k = c.legs[1].thigh; k >= 0; k = skeleton.joint(k).parent) {
      if (k == model.hips) above = true;
    }
    if (!above) model.hips = skeleton.joint(model.hips).parent;
  }
  if (model.hips < 0) model.hips = c.pelvis;
  model.hips_forward = at[model.hips].rotation.conjugate() * c.forward;
  model.head_forward = at[c.head].rotation.conjugate() * c.forward;
  return model;
}

void AddBodyGoals(const Skeleton& skeleton, const BodyModel& model,
                  const FullBodyOptions& options, bool new_character,
                  std::vector<Transform>& scratch,
                  std::vector<char>& known, std::vector<Goal>& goals,
                  std::vector<char>& soft, std::vector<double>& cone,
                  std::vector<double>& stiffness, Pose* pose) {
  const int requested = static_cast<int>(goals.size());
  LazyGlobals globals(skeleton, *pose, scratch, known);
  int head = -1;
  std::array<int, 2> foot = {-1, -1}, hand = {-1, -1};
  int last_priority = 0;
  for (int i = 0; i < requested; ++i) {
    const Goal& g = goals[i];
    if (g.solver != SolverKind::kFullBody) continue;
    last_priority = std::max(last_priority, g.priority);
    if (g.aim_axis) continue;
    const int e = EffectorOf(skeleton, g);
    if (e == model.head && head < 0) head = i;
    for (int side = 0; side < 2; ++side) {
      if (e == model.legs[side].foot && foot[side] < 0) foot[side] = i;
      if (e == model.arms[side].hand && hand[side] < 0) hand[side] = i;
    }
  }
  // The shoulder girdle joins in when a hand's target is beyond the arm's
  // reach from where the shoulder is: a clavicle whose stiffness is its
  // role's is kStillClavicle while the target is within reach, its role's
  // from kClavicleFreeBeyond of an arm beyond. (A clavicle as free as its role for
  // every hand motion moved where the performers' never do, 21-54 degrees
  // a second more than 1.5 times theirs; stiff for every reach, hands to
  // the floor folded the spine instead.)
  for (int side = 0; side < 2; ++side) {
    const int clavicle = model.arms[side].clavicle;
    if (clavicle < 0 || hand[side] < 0 ||
        skeleton.joint(clavicle).stiffness != 0.0 ||
        !(model.arm_length[side] > 0.0)) {
      continue;
    }
    const double beyond = (goals[hand[side]].target -
                           globals[model.arms[side].upper_arm].translation)
                                  .norm() /
                              model.arm_length[side] -
                          1.0;
    const double t = std::clamp(beyond / kClavicleFreeBeyond, 0.0, 1.0);
    stiffness[clavicle] =
        kStillClavicle + t * (model.stiffness[clavicle] - kStillClavicle);
  }
  // The feet the request places (the others may be in the air).
  const std::array<bool, 2> placed = {foot[0] >= 0, foot[1] >= 0};
  std::array<Vector3d, 2> feet;
  for (int side = 0; side < 2; ++side) {
    feet[side] = foot[side] >= 0 ? goals[foot[side]].target
                                 : globals[model.legs[side].foot].translation;
  }
  const Vector3d feet_mid = 0.5 * (feet[0] + feet[1]);
  // Sparse trackers: a foot without a goal stays where it stands (its
  // place and turn before the pelvis pass moves the body).
  std::array<Quaterniond, 2> stands;
  for (int side = 0; side < 2; ++side) {
    stands[side] = globals[model.legs[side].foot].rotation;
  }
  const Transform pelvis = globals[model.pelvis];
  Vector3d up = NearestAxis(
      (head >= 0 ? goals[head].target : globals[model.head].translation) -
      feet_mid);
  if (up.isZero()) return;

  // The heading: a mean of cues, each a unit direction weighted by how much
  // it says at this frame. Where the hips face now (continuity: a heading
  // that jumps is worse than one that lags; see below), the feet and the
  // head where the goals turn them, and the lines across
  // the feet and across the hands, each on its own (summed as vectors, the
  // longer line decided alone). A foot raised above the other says less:
  // its turn and the feet's line fade out over a quarter of a leg (a raised
  // foot swings behind or across the standing one, and the line through
  // them turned the pelvis 100 degrees off on the hop clip; a threshold
  // instead of a fade jumped at it).
  // Where the hips face (the line across the sockets, measured on the joint
  // that turns it: a goal on the pelvis above a free helper left the
  // sockets 22-33 degrees off on Character Creator's and BCN's rigs).
  const Vector3d facing =
      Flat(globals[model.hips].rotation * model.hips_forward, up);
  std::array<double, 2> grounded;
  {
    const double low = std::min(feet[0].dot(up), feet[1].dot(up));
    const double fade = kRaisedFootFade * model.leg_length[0];
    for (int side = 0; side < 2; ++side) {
      grounded[side] =
          fade > 0.0
              ? std::clamp(1.0 - (feet[side].dot(up) - low) / fade, 0.0, 1.0)
              : 1.0;
    }
  }
  // How much a line between two points says: the feet's only while both
  // stand, and a short line less (between close points its direction
  // turns far for a small move of either).
  auto say = [&](const Vector3d& a, const Vector3d& b, double weight) {
    const double sure = kSureLine * model.leg_length[0];
    return sure > 0.0 ? weight * std::min(1.0, Flat(a - b, up).norm() / sure)
                      : weight;
  };
  // Continuity, one cue: where the hips face now, turned as far as the lines
  // across the feet and the hands turned from where the start pose has them
  // (on a stream, the previous frame's). (Not turned, it held the 30 Hz
  // hop's spin 139 degrees off: the lag grew past 90 degrees and the cues
  // pulled it round the other way; half a cue instead, the wave at 30 Hz
  // leaned and left its MPJPE bar. Turned: 72 degrees, the wave 4.5 cm.)
  Vector3d prior = facing.normalized();
  {
    double c = 0.0, s = 0.0;
    auto turned = [&](const Vector3d& now, const Vector3d& before,
                      double weight) {
      const Vector3d a = Flat(before, up), b = Flat(now, up);
      const double n = a.norm() * b.norm();
      if (!(n > 0.0) || !(weight > 0.0)) return;
      c += weight * a.dot(b) / n;
      s += weight * up.dot(a.cross(b)) / n;
    };
    if (placed[0] && placed[1]) {
      turned(feet[0] - feet[1],
             globals[model.legs[0].foot].translation -
                 globals[model.legs[1].foot].translation,
             say(feet[0], feet[1], grounded[0] * grounded[1]));
    }
    if (hand[0] >= 0 && hand[1] >= 0) {
      turned(goals[hand[0]].target - goals[hand[1]].target,
             globals[model.arms[0].hand].translation -
                 globals[model.arms[1].hand].translation,
             say(goals[hand[0]].target, goals[hand[1]].target, 1.0));
    }
    if (c > 0.0) prior = Eigen::AngleAxisd(std::atan2(s, c), up) * prior;
  }
  Vector3d heading = prior;
  auto add = [&](const Vector3d& f, double weight) {
    if (f.norm() > 1e-9 && weight > 0.0) heading += weight * f.normalized();
  };
  for (int side = 0; side < 2; ++side) {
    if (foot[side] >= 0 && goals[foot[side]].target_orientation) {
      add(Flat(goals[foot[side]].target_orientation->normalized() *
                   model.foot_forward[side],
               up),
          grounded[side]);
    }
  }
  if (head >= 0 && goals[head].target_orientation) {
    add(Flat(goals[head].target_orientation->normalized() * model.head_forward,
             up),
        1.0);
  }
  auto line = [&](const Vector3d& a, const Vector3d& b, double weight) {
    add(Flat(a - b, up).cross(up), say(a, b, weight));
  };
  line(feet[0], feet[1], grounded[0] * grounded[1]);
  if (hand[0] >= 0 && hand[1] >= 0) {
    line(goals[hand[0]].target, goals[hand[1]].target, 1.0);
  }
  if (!(heading.norm() > 1e-9)) heading = facing;
  heading.normalize();

  // The body model's levels: planted feet first (sparse trackers), then
  // the pelvis.
  int soft_priority = last_priority + 1;
  const bool plant = options.plant_feet && (foot[0] < 0 || foot[1] < 0) &&
                     soft_priority <= kMaxPriority;
  const int stand_priority = soft_priority;
  if (plant) ++soft_priority;
  // The planted feet's goals (after the pelvis pass, which may step them).
  auto add_stands = [&] {
    if (!plant) return;
    for (int side = 0; side < 2; ++side) {
      if (foot[side] >= 0) continue;
      Goal stand;
      stand.solver = SolverKind::kFullBody;
      stand.tip_joint = model.legs[side].foot;
      stand.target = feet[side];
      stand.target_orientation = stands[side];
      stand.priority = stand_priority;
      foot[side] = static_cast<int>(goals.size());
      goals.push_back(stand);
      // A new character's feet (at rest) have stood nowhere yet: soft like
      // the pelvis' (held until reached, they took solver_bench's sparse
      // row from rest 14 -> 26 iterations a solve).
      soft.push_back(new_character ? FullBodyScratch::kModelGoal
                                   : FullBodyScratch::kFirmModelGoal);
      cone.push_back(0.0);
    }
  };
  if ((head >= 0 || hand[0] >= 0 || hand[1] >= 0) &&
      soft_priority <= kMaxPriority && facing.norm() > 1e-9) {
    // The pelvis pass. Horizontally under the head (keeping half of the
    // lean the start pose has; where it is without a head goal), as high
    // as the trunk upright puts it under the head (without a head goal,
    // low enough that the upright trunk's shoulders reach the hands: a
    // reach to the floor is a squat before it is a fold), no higher than
    // the legs reach the feet,
    // no lower than a deep squat. Without a head goal, only hands too low
    // for the pelvis where it stands move it, and only down.
    Vector3d target = Flat(pelvis.translation, up);
    double height = std::numeric_limits<double>::infinity();
    if (head >= 0) {
      const Vector3d head_target = goals[head].target;
      const Vector3d lean =
          0.5 * Flat(pelvis.translation - globals[model.head].translation, up);
      target = Flat(head_target, up) + lean;
      height = head_target.dot(up) - model.trunk_height;
    }
    // Without a head goal, both hands low: the pelvis goes down as far as
    // the higher hand needs. (With a head goal the head decides: a hand
    // limit there took the Character Creator clip's pelvis 3 cm further
    // from the performer's. One low hand, or hands less than a tenth of a
    // leg too low, leave it: on solver_bench's gameplay poses lowering for
    // either hand slowed the warm stream by half.)
    bool lower = false;
    if (head < 0 && hand[0] >= 0 && hand[1] >= 0) {
      double need = -std::numeric_limits<double>::infinity();
      for (int side = 0; side < 2; ++side) {
        need = std::max(need, goals[hand[side]].target.dot(up) +
                                  model.arm_length[side] -
                                  model.shoulder_height[side]);
      }
      lower = need < pelvis.translation.dot(up) - 0.1 * model.leg_length[0];
      if (lower) height = need;
    }
    std::array<Vector3d, 2> sockets;
    for (int side = 0; side < 2; ++side) {
      sockets[side] =
          globals[model.legs[side].thigh].translation - pelvis.translation;
    }
    if (head >= 0 && placed[0] && placed[1] && model.height > 0.0) {
      // Balance: a body standing on both feet keeps its centre of mass
      // over them (a crouch pushes the pelvis back and leans the trunk
      // forward; the hips sway out from a head leaning over one foot).
      // The pelvis moves along the floor until it is, the trunk straight
      // from it to the head. (Against the performer on the CMU clips,
      // both feet placed: the crouching jump's pelvis height error max
      // 11.2 -> 7.5 cm and trunk 59 -> 35 degrees, the shoot's 11.9 ->
      // 4.9 cm and 37 -> 26 degrees; docs/full-body.md, "A body that moves
      // like a person".)
      BalanceInput in;
      in.up = up;
      in.forward = heading;
      in.head = goals[head].target;
      for (int side = 0; side < 2; ++side) {
        in.hands[side] = hand[side] >= 0
                             ? goals[hand[side]].target
                             : globals[model.arms[side].hand].translation;
        in.feet[side] = feet[side];
        in.sockets[side] = sockets[side];
      }
      const double t = model.trunk_height;
      for (int round = 0; round < 4; ++round) {
        const Vector3d across = target - Flat(in.head, up);
        const double drop =
            std::sqrt(std::max(0.25 * t * t, t * t - across.squaredNorm()));
        const Vector3d place = target + (in.head.dot(up) - drop) * up;
        const Vector3d out =
            OutsideSupport(model, in, CentreOfMass(model, in, place));
        if (out.squaredNorm() < 1e-12 * model.height * model.height) break;
        // About 0.6 of the mass moves with the pelvis (trunk, thighs, part
        // of the arms): a little less than a full correction per round,
        // from outside.
        target -= out / kMovesWithPelvis;
      }
    }
    // The body turns about up through the pelvis to the heading (with a
    // head goal).
    const double turn =
        head < 0 ? 0.0
                 : std::atan2(up.dot(facing.normalized().cross(heading)),
                              facing.normalized().dot(heading));
    const Quaterniond spin(Eigen::AngleAxisd(turn, up));
    if (plant && (head >= 0 || lower)) {
      // The lowest the pelvis can be: under the head with the trunk
      // upright (with a head goal).
      StepFeet(model, up, heading, pelvis.translation, target, spin, sockets,
               placed, options.plant_height,
               head >= 0 ? goals[head].target.dot(up) - model.trunk_height
                         : std::numeric_limits<double>::quiet_NaN(),
               feet, stands);
    }
    if (head >= 0) {
      // The ankles' limits: a crouch deeper than they let the shins tilt
      // over feet whose turn is fixed left the pelvis above where the legs
      // reach it, and the trunk between it and the head folded to make up
      // the height (the limited humanoid's VR crouch: 50-65 degrees of
      // spine, its ankles at their 45.8-degree cones). The pelvis goes
      // back instead, the upright trunk leaning about the shoulders (the
      // arms keep their reach; the neck takes the head), as far as the
      // legs need (up to kMostLean). A foot without a fixed turn (no
      // orientation goal, not planted by the model) sets no bound.
      std::array<const Quaterniond*, 2> turned = {nullptr, nullptr};
      for (int side = 0; side < 2; ++side) {
        if (foot[side] >= 0 && goals[foot[side]].target_orientation) {
          turned[side] = &*goals[foot[side]].target_orientation;
        } else if (foot[side] < 0 && plant) {
          turned[side] = &stands[side];
        }
      }
      const double t =
          0.5 * (model.shoulder_height[0] + model.shoulder_height[1]);
      const Vector3d back = -heading;
      auto at_lean = [&](double lean) {
        return Vector3d(target + t * std::sin(lean) * back +
                        (height + t * (1.0 - std::cos(lean))) * up);
      };
      auto excess = [&](double lean) {
        const Vector3d place = at_lean(lean);
        double most = -std::numeric_limits<double>::infinity();
        for (int side = 0; side < 2; ++side) {
          if (turned[side] == nullptr) continue;
          most = std::max(most,
                          AnkleExcess(model, side, place + spin * sockets[side],
                                      feet[side], turned[side]->normalized()));
        }
        return most;
      };
      if (excess(0.0) > 0.0 && excess(kMostLean) <= 0.0) {
        double lo = 0.0, hi = kMostLean;
        for (int i = 0; i < 30; ++i) {
          const double mid = 0.5 * (lo + hi);
          (excess(mid) > 0.0 ? lo : hi) = mid;
        }
        const Vector3d place = at_lean(hi);
        target = Flat(place, up);
        height = place.dot(up);
      }
    }
    double lowest = -std::numeric_limits<double>::infinity();
    for (int side = 0; side < 2; ++side) {
      const Vector3d& socket = sockets[side];
      const double reach = model.leg_length[side];
      const double across_foot =
          (Flat(target + socket, up) - Flat(feet[side], up)).norm();
      const double rise =
          std::sqrt(std::max(0.0, reach * reach - across_foot * across_foot));
      height = std::min(height, feet[side].dot(up) + rise - socket.dot(up));
      lowest =
          std::max(lowest, feet[side].dot(up) + 0.25 * reach - socket.dot(up));
    }
    height = std::max(height, lowest);
    if (head >= 0 || lower) {
      target += height * up;
      // Turn the whole body about up through the pelvis to the heading, then
      // move it there (the top root carries everything).
      int top = model.pelvis;
      while (skeleton.joint(top).parent >= 0) {
        top = skeleton.joint(top).parent;
      }
      Transform& root = pose->local[top];
      root.translation =
          target + spin * (root.translation - pelvis.translation);
      root.rotation = (spin * root.rotation).normalized();
      globals.Reset();

      Goal place = BodyGoal(model.pelvis, target, soft_priority);
      Goal face = BodyGoal(model.pelvis, target, soft_priority);
      face.aim_axis = model.pelvis_forward;
      // Facing the heading; without a head goal, where it faces (upright:
      // a reach down is not a bow at the hips).
      face.target =
          target + model.leg_length[0] *
                       (head >= 0
                            ? heading
                            : Flat(pelvis.rotation * model.pelvis_forward, up)
                                  .normalized());
      goals.push_back(place);
      goals.push_back(face);
      soft.push_back(FullBodyScratch::kModelGoal);
      soft.push_back(FullBodyScratch::kModelGoal);
      cone.push_back(0.0);
      cone.push_back(0.0);
      // A free joint below the pelvis that carries both hip sockets faces
      // the heading too. (Held on the pelvis alone, such a helper turned
      // the hip line 22-33 degrees off on Character Creator's and BCN's
      // rigs; held instead of the pelvis, the pelvis bowed over it, BCN's
      // spine 132 degrees for hands to the floor.)
      if (head >= 0 && model.hips != model.pelvis) {
        Goal hips = BodyGoal(model.hips, target, soft_priority);
        hips.aim_axis = model.hips_forward;
        hips.target = target + model.leg_length[0] * heading;
        goals.push_back(hips);
        soft.push_back(FullBodyScratch::kModelGoal);
        cone.push_back(0.0);
      }
    }
  }

  add_stands();

  for (int side = 0; side < 2; ++side) {
    if (foot[side] >= 0) {
      Vector3d knee = heading;
      if (goals[foot[side]].target_orientation) {
        const Vector3d f =
            Flat(goals[foot[side]].target_orientation->normalized() *
                     model.foot_forward[side],
                 up);
        if (f.norm() > 1e-9) knee = (knee + f.normalized()).normalized();
      }
      PreferBend(skeleton, model.legs[side].thigh,
                 globals[model.legs[side].shin].translation, knee,
                 model.leg_length[side], goals[foot[side]], cone[foot[side]]);
    }
    if (hand[side] >= 0) {
      const Vector3d elbow = (-heading - 0.5 * up).normalized();
      PreferBend(skeleton, model.arms[side].upper_arm,
                 globals[model.arms[side].forearm].translation, elbow,
                 model.arm_length[side], goals[hand[side]], cone[hand[side]]);
    }
  }
}

}  // namespace reach
