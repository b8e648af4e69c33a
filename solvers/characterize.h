// Characterisation of a humanoid skeleton: which joint plays which role
// (pelvis, spine, neck, head, clavicle / upper arm / forearm / hand and
// thigh / shin / foot / toe per side), found from the skeleton's shape and
// its joint names, for retargeting between rigs that name and proportion
// their bones differently, and for the full-body solver's body model
// (solvers/full_body/body_model.h). Part of the solver library: no
// transport.
#ifndef REACH_SOLVERS_CHARACTERIZE_H_
#define REACH_SOLVERS_CHARACTERIZE_H_

#include <array>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"

namespace reach {

enum Side { kLeft = 0, kRight = 1 };

// One side's limbs; -1 where the rig has no such joint (an arm straight
// off the chest has no clavicle, a foot may have no toe joint).
struct Arm {
  int clavicle = -1;
  int upper_arm = -1;
  int forearm = -1;
  int hand = -1;
};
struct Leg {
  int thigh = -1;
  int shin = -1;
  int foot = -1;
  int toe = -1;
};

// How a role's joint was decided, for the report.
enum class Decided {
  kName,      // Its name, in the dictionaries, in the place the shape allows.
  kNameOrder,  // Its name could mean two roles ("LeftShoulder": clavicle in
               // the CMU MotionBuilder rigs, upper arm in others); its
               // place among its named neighbours decided.
  kShape,     // The skeleton's shape (no name in the dictionaries, or names
              // that disagree): the limb's two longest bones, the joint
              // where legs and spine meet, the joint where the arms branch.
  kOverride,  // Named by the caller.
};
absl::string_view DecidedName(Decided how);

struct RoleAssignment {
  std::string role;  // "pelvis", "spine.0", "left.upper_arm", ...
  int joint = -1;
  Decided how = Decided::kShape;
};

// A finger: its joints from the hand outwards. `name` is "thumb",
// "index", "middle", "ring" or "pinky" where the joints' names say so,
// "thumb" for the finger set apart from the others by shape, else
// "finger1", "finger2", ... nearest the thumb first.
struct Finger {
  std::string name;
  std::vector<int> joints;
  bool named = false;  // `name` from the joints' names (else the shape).
};

struct Characterization {
  int pelvis = -1;        // Where the legs and the spine meet.
  std::vector<int> spine;  // Pelvis side first; the last is the chest,
                           // where the arms branch.
  std::vector<int> neck;   // Chest side first (may be empty).
  int head = -1;
  std::array<Arm, 2> arms;  // [kLeft], [kRight]: the character's own left.
  std::array<Leg, 2> legs;
  // Unit model-space directions of the rest pose: up (feet to chest),
  // forward (heel to toe), and the character's left.
  Eigen::Vector3d up = Eigen::Vector3d::UnitY();
  Eigen::Vector3d forward = Eigen::Vector3d::UnitZ();
  Eigen::Vector3d left = Eigen::Vector3d::UnitX();
  bool sides_from_names = false;  // Else from up x forward.
  // Every role that has a joint, in a fixed order (pelvis, spine, neck,
  // head, left arm, right arm, left leg, right leg).
  std::vector<RoleAssignment> roles;
  // Per hand ([kLeft], [kRight]), thumb first: the chains below the hand
  // (a joint where a chain forks, a palm, is no finger's). Their joints
  // have the roles SIDE.NAME.I (I along the finger from 0).
  std::array<std::vector<Finger>, 2> fingers;
  std::vector<int> unmapped;  // Joints with no role, ascending.
  // What the characterisation accepted but a user should know: left and
  // right limbs that are not mirror images (fingers, helper bones, extra
  // toes), naming the joints and bones that differ.
  std::vector<std::string> warnings;
};

// A caller's choice for one role: "left.hand" = "LeftHandIndex1".
struct RoleOverride {
  std::string role;
  std::string joint;
};

// The roles of `skeleton`'s joints. Overrides name single-joint roles
// (pelvis, head, SIDE.clavicle|upper_arm|forearm|hand|thigh|shin|foot|toe)
// and replace what was found; a joint given a role by an override loses
// any other. Errors: InvalidArgument naming the override
// ("overrides[1].role: ...") or saying what shape is missing (no two
// mirrored legs, no two mirrored arms).
//
// The shape is read from `reference` when given (a pose of the skeleton),
// else from the rest pose: some rigs' rest is no stance (a Character
// Creator BVH's zero rotations lay every bone along its parent's local
// axis, legs up), and one of their frames serves instead.
absl::StatusOr<Characterization> Characterize(
    const Skeleton& skeleton, absl::Span<const RoleOverride> overrides = {},
    const Pose* reference = nullptr);

// The role a joint plays ("" if none).
std::string RoleOf(const Characterization& c, int joint);

// A human-readable report: role -> joint and how it was decided, the
// axes, and the unmapped joints.
std::string FormatCharacterization(const Skeleton& skeleton,
                                   const Characterization& c);

}  // namespace reach

#endif  // REACH_SOLVERS_CHARACTERIZE_H_
