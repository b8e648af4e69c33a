// The body model of the full-body solver: what a humanoid skeleton says
// about how a person moves, derived from the skeleton alone (its
// characterisation, solvers/characterize.h) once, when it is created.
//
// - Helper joints that only split a leg off the pelvis (the CMU rigs'
//   LHipJoint / RHipJoint: zero length, at the pelvis, one leg below) are
//   part of the pelvis: turning one would move that hip socket alone (the
//   hips "come apart"), so the solver keeps them at their pose.
// - Stiffness by role where the skeleton gives none: the spine, neck and
//   clavicles resist turning more than hips and knees (people lower the
//   pelvis and bend their knees before they fold their back; clavicles
//   barely move), the pelvis' own rotation a little.
// - Lengths the pelvis pass needs: each leg from hip socket to ankle,
//   each arm, and the trunk from pelvis to head.
//
// A skeleton that is not a humanoid (no two mirrored legs and arms) has
// `human` false and the solver runs without a body model.
#ifndef REACH_SOLVERS_FULL_BODY_BODY_MODEL_H_
#define REACH_SOLVERS_FULL_BODY_BODY_MODEL_H_

#include <Eigen/Core>
#include <array>
#include <limits>
#include <vector>

#include "solvers/characterize.h"
#include "solvers/goal.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"

namespace reach {

// Default stiffness of each role (Joint::stiffness, where the skeleton
// sets none), chosen by measuring against the performer on the CMU clips
// (scripts/bench-full-body-motion): see docs/full-body.md, "A body that
// moves like a person".
struct RoleStiffness {
  double spine = 0.6;
  double neck = 0.6;
  double clavicle = 0.8;
  double pelvis = 0.3;  // The root's rotation.
};

struct BodyModel {
  // Per joint, on every skeleton (humanoid or not): the lengths of the
  // rest pose's bones from its top root down to it (how far from the root
  // it can ever be).
  std::vector<double> reach;
  bool human = false;
  int pelvis = -1;
  // The joint whose turn turns the line across the hip sockets: the lowest
  // joint above both thighs (the pelvis on most rigs; a helper below it,
  // free, on Character Creator's and BCN's).
  int hips = -1;
  int head = -1;
  std::array<Arm, 2> arms;
  std::array<Leg, 2> legs;
  // Per joint: the stiffness the solver uses (the skeleton's own where it
  // sets one, else its role's), and whether it is a pelvis helper the
  // solver never turns.
  std::vector<double> stiffness;
  std::vector<char> fixed;
  // Whether the rest pose stands: its pelvis-to-head line within 45
  // degrees of the characterisation's up. Where it does not (a Character
  // Creator export whose zero pose holds every limb up, whose up comes out
  // upside down), the rest pose says nothing about a natural posture or a
  // flexion axis, and the model adds neither (below).
  bool rest_stands = false;
  // Per joint: an unlimited ball knee or elbow's flexion axis in its own
  // frame (zero elsewhere). Knees and elbows are hinges: the CMU
  // performers' turn about one axis of their own frame (spread 0 degrees
  // on the jump, walk and hop), and a ball elbow that bends sideways bends
  // where no arm can (the walk's right elbow bent about an axis 60 degrees
  // off the performer's on 64 frames). The solver turns such a joint about
  // this axis; its other two axes are kHingeSideStiffness stiff. The axis
  // is the rest pose's bend where the limb is bent at rest, else the one
  // that takes the lower bone forward (elbow) or back (knee).
  std::vector<Eigen::Vector3d> hinge_axis;
  // Per anatomical hinge: its least flexion about hinge_axis from the rest
  // rotation, radians (<= 0): the limb straight. No knee or elbow bends
  // backwards: free of it, a limb whose goal moves past straight (an arm
  // swinging down beside the body) folds through to the other side of
  // its plane, the performer's bend flipped.
  std::vector<double> hinge_straight;
  // The posture: the unlimited spine, neck and clavicle joints, and each
  // one's natural local rotation (relax_to): the rest rotation where the
  // rest pose points the joint's bone within 45 degrees of where a
  // standing body does (spine and neck up, clavicles out to their side),
  // else the rest rotation swung that way. The solver draws them toward it
  // in the goals' null space (kRelaxGain, kPostureRounds): left alone,
  // what the goals do not fix drifts from frame to frame of a stream
  // (the jump's chest 55 degrees off the performer's, clavicles 25-34
  // degrees where the performers' never turn). A warm solve also keeps
  // them where they were wherever the goals allow: they turn as the goals
  // need and as the posture draws them, not by their share of the goals'
  // least-norm step (a hand's wave swung the chest).
  std::vector<int> relax;
  std::vector<Eigen::Quaterniond> relax_to;
  // Path lengths of the rest pose: hip socket (thigh) to ankle (foot),
  // shoulder (upper arm) to wrist (hand), per side.
  std::array<double, 2> leg_length{};
  std::array<double, 2> arm_length{};
  // Hip socket to knee, knee to ankle (thigh to shin, shin to foot).
  std::array<double, 2> thigh_length{};
  std::array<double, 2> shin_length{};
  // Per side: the shin's rest direction (ankle to knee) in the foot's rest
  // frame, and how far the ankle lets the shin tilt from it over a foot
  // whose turn is fixed (the foot joint's swing cone; +inf where the ankle
  // is no limited ball).
  std::array<Eigen::Vector3d, 2> shin_in_foot{
      {Eigen::Vector3d::UnitY(), Eigen::Vector3d::UnitY()}};
  std::array<double, 2> ankle_cone{
      {std::numeric_limits<double>::infinity(),
       std::numeric_limits<double>::infinity()}};
  // The rest pose's standing height (lowest foot to head along up).
  double height = 0.0;
  // The rest pose's head above the pelvis along its own up (the trunk
  // upright; 0.95 of the path between them where the rest pose is no
  // stance).
  double trunk_height = 0.0;
  // Likewise each shoulder (upper arm) above the pelvis.
  std::array<double, 2> shoulder_height{};
  // Unit directions in each joint's rest frame: the character's forward
  // as seen from the pelvis, the head and each foot (their rest rotation's
  // inverse applied to the characterisation's forward).
  Eigen::Vector3d pelvis_forward = Eigen::Vector3d::UnitZ();
  Eigen::Vector3d hips_forward = Eigen::Vector3d::UnitZ();
  Eigen::Vector3d head_forward = Eigen::Vector3d::UnitZ();
  std::array<Eigen::Vector3d, 2> foot_forward{
      {Eigen::Vector3d::UnitZ(), Eigen::Vector3d::UnitZ()}};
};

// The body model of `skeleton` (human false when it is not a humanoid).
BodyModel BuildBodyModel(const Skeleton& skeleton,
                         const RoleStiffness& stiffness = {});

// The body model's part of a full-body solve whose root is the skeleton's
// top root (free), from `pose` (the start; `globals` and `known` are
// scratch for its model-space transforms). `goals` holds the request's
// goals on entry, `soft` and `cone` one entry each (kRequestGoal, 0); the
// goals the model adds get theirs appended (FullBodyScratch::GoalKind).
//
// - The pelvis pass, when a goal puts the head or a hand somewhere: up is
//   the model axis nearest the feet-to-head direction; the pelvis goes
//   under the head by the rest pose's trunk height (the trunk upright: a
//   lower head lowers the pelvis and bends the knees) and low enough for
//   the upright trunk's shoulders to reach the hands, but no higher than
//   the legs reach the feet, and back, the trunk leaning about the
//   shoulders, where the ankles' cones do not let the shins tilt over
//   planted feet as far as the crouch needs; it turns toward the heading: a mean of cues
//   weighted by what each says at the frame (where the hips face now,
//   carried along as far as the lines across the feet and the hands turned
//   from the start pose; the feet's and the head's forward; the lines
//   across the feet and the hands; a raised foot and a short line say
//   less). The pose's root is moved there, and goals of the body model
//   (soft: solved after every goal of the request, in their null space,
//   never keeping a solve going) hold the pelvis there and facing there,
//   and `hips` too where it is not the pelvis.
// - Preferred bends: a foot or hand goal without a pole gets one in front
//   of the knee (the heading) or behind and below the elbow, with a cone of
//   `kPreferredBendCone` left free: the limb turns only when its bend is
//   further than that from the preferred side (a knee about to flip).
// - Sparse trackers (`plant_feet`): a foot the goals do not place stays
//   where the start pose has it, position and turn, while it is within
//   its stance region about its home (under its hip socket where the
//   pelvis goes) and the hip reaches it; otherwise, as the body leaves
//   it, it steps home, one foot at a time (a goal after every request
//   goal and before the pelvis', that keeps the solve going until it is
//   reached: kFirmModelGoal, where the pelvis' are kModelGoal; a
//   `new_character`'s, at rest, kModelGoal too). With a `plant_height`
//   (not NaN: FullBodyOptions::plant_height) that is the floor: a foot
//   above it steps down to it, and steps land on it; without, the lower
//   foot is.
// `options`: the request's plant_feet and plant_height.
void AddBodyGoals(const Skeleton& skeleton, const BodyModel& model,
                  const FullBodyOptions& options, bool new_character,
                  std::vector<Transform>& globals,
                  std::vector<char>& known, std::vector<Goal>& goals,
                  std::vector<char>& soft, std::vector<double>& cone,
                  std::vector<double>& stiffness, Pose* pose);

inline constexpr double kPreferredBendCone = 1.0;  // Radians.

// The stiffness of an anatomical hinge's (BodyModel::hinge_axis) two other
// axes.
inline constexpr double kHingeSideStiffness = 0.99;

// The share of the way to the natural posture (BodyModel::relax) the first
// accepted step of every solve takes, in the goals' null space: a stream
// relaxes over its frames, and a frame's goals converge as without it
// (0.2 left more flips and cost more iterations; with the heading's cues,
// 0.1 let the wave's trunk lean, 5.02 cm from the performer at 30 Hz, and
// 0.15 stalled three frames of the BCN gameplay stream: docs/full-body.md).
inline constexpr double kRelaxGain = 0.12;

// A solve from the rest pose that converges with the posture folded (its
// joints' angles from their natural rotations summing to more than
// kFoldedPosture radians) takes up to kPostureRounds posture steps of
// kPostureGain each, converging again after any that costs a goal, while
// it has used less than half its iterations. (Rounds after every solve
// from rest slowed solver_bench's 54-joint rig from rest 2.5 times.)
inline constexpr int kPostureRounds = 4;
inline constexpr double kPostureGain = 0.5;
inline constexpr double kFoldedPosture = 2.0;

}  // namespace reach

#endif  // REACH_SOLVERS_FULL_BODY_BODY_MODEL_H_
