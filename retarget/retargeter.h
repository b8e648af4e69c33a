// The whole retarget of one frame: the motion transfer (transfer.h), then
// hands and feet put where the source's are, in proportion, by one
// full-body solve (SOLVER_FULL_BODY), with planted feet held in place.
//
// Per frame:
// 1. The transfer poses every mapped joint as its source counterpart turns
//    and moves the hips by the source's motion, scaled.
// 2. Goals, in the target's model space. A hand's (priority 1) position:
//    where the arm's bones, with the target's lengths, put it when each
//    turns as its source joint turns (the transfer's pose of the arm before
//    limits), so the elbow bends as the performer's whatever the arms'
//    proportions. A foot's (priority 0): the thigh plus the source leg's
//    direction times the source's extension ratio (its start-to-end
//    distance over its length) times the target leg's length (UE's IK
//    Retargeter rule), so its height over the floor scales as the hips'.
//    Orientation: the transferred one (the source's, turned as the rest
//    of the pose). Each
//    limb's pole is its transferred knee or elbow, so it bends as the
//    source's does (a straight one: the way it bent in the retarget pose).
// 3. Planting, decided by the source foot alone: it is in stance while its
//    ankle is low and slow (Stance: below contact_height leg lengths over
//    the source's floor and contact_speed leg lengths per second, its move
//    since the previous frame; with hysteresis, out only above 1.5x the
//    height or the speed). For the whole stance, its first frame and its
//    last included, the target foot keeps the place on the floor it had on
//    the first (up and down it follows the live goal, so a heel that lifts
//    lifts), even while the source's foot creeps (an ankle rolling over
//    the toe, a pivot: 0.05-0.2 leg lengths over a stance in the test
//    clips). Where the leg cannot reach it on the floor from where the
//    transfer put the thigh (the end of a walk's stance: the source's
//    ankle has rolled forward over the toe), the held foot lifts, its
//    place along the floor kept, rather than slide; the body keeps the
//    source's motion. When the source foot leaves, the goal catches up
//    with the live one no faster than 0.5 leg lengths per second beyond it
//    (eased in over `release_seconds`, out over 0.1 s); a new stance
//    before it has caught up holds where it got to. No foot goal is placed
//    below the floor plus the ankle's height. On a rig with limits, where
//    a held foot is nearer the thigh than the leg's limits let it fold (a
//    knee stopping at its range's end in a deep crouch), the pelvis moves
//    away from it, out along the line from the foot, until it is within
//    reach (eased, weighted by the stance), rather than the foot slide.
// 4. One full-body solve (full_body.h) from the transferred pose, its root
//    pinned: only the limbs with goals turn (upper arm to hand, thigh to
//    foot, and any joints between); pelvis, spine, neck and clavicles keep
//    the transferred pose. Goals are met to 1e-4 of the body's size and
//    1e-3 rad. On a rig with limits, a held foot the solve leaves short of
//    its place is solved again with its turn after its place; a foot goal
//    within 0.02 leg lengths of its leg's nearest reach (the knee at the
//    end of its range) has no turn in the solve, and after it the ankle
//    alone turns the foot as the transferred one, as near as its limits
//    allow (the whole leg chasing that turn swung its plane by up to 31
//    degrees in a frame).
//
// Each frame starts from its own transferred pose: it is within one source
// frame of the previous answer (the source moved that little), and unlike
// the previous answer it carries the source's twist of the limbs, which no
// goal fixes and which a solve started from the previous frame would leave
// wherever it drifted. State that must carry between frames (stances,
// planted places, catch-up offsets) lives in RetargetState, one per
// stream.
//
// Depends on solvers/ only.
#ifndef REACH_RETARGET_RETARGETER_H_
#define REACH_RETARGET_RETARGETER_H_

#include <array>
#include <optional>
#include <vector>

#include "Eigen/Core"
#include "Eigen/Geometry"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "retarget/characterize.h"
#include "retarget/transfer.h"
#include "solvers/chain_solver.h"
#include "solvers/deadline.h"
#include "solvers/goal.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"

namespace reach::retarget {

struct RetargetOptions {
  // IK per limb ([kLeft], [kRight]): a limb without it keeps the
  // transferred pose (no goal).
  std::array<bool, 2> arm_ik = {true, true};
  std::array<bool, 2> leg_ik = {true, true};
  // Hold feet where they landed while the source's is in stance (needs leg
  // IK on that side).
  bool plant_feet = true;
  // The source's floor: its height along the source's vertical (the model
  // axis nearest the characterisation's up), in source units. Unset: the
  // first frame of each stream (state) stands on it, its lower ankle
  // ankle_height leg lengths above it (mocap often puts the floor at the
  // origin's plane, 0, but not always: a Character Creator export has it
  // a metre below). The target's floor is where the pelvis' mapping (its
  // scale, its frame) takes it. Finite when set.
  std::optional<double> source_floor;
  // A source foot is in stance (Stance) from when its ankle is within
  // contact_height source leg lengths of the floor and moves slower than
  // contact_speed leg lengths per second (its move since the previous
  // frame, unsmoothed) until it rises above 1.5x the height or moves at
  // more than 1.5x the speed. Both > 0, at most 10.
  double contact_height = 0.2;
  double contact_speed = 0.5;
  // The ankle's height above the floor when the sole is on it, in leg
  // lengths (of each rig): no foot goal goes lower. In [0, 1].
  double ankle_height = 0.05;
  // Over how long a released foot's catch-up with its live goal eases in
  // to its full rate (0.5 leg lengths per second beyond the live goal's
  // own speed), seconds. In [0, 10]; 0: at once.
  double release_seconds = 0.1;
  // Full-body iteration cap per frame, in [1, 1000].
  int max_iterations = 32;
  // The pelvis' motion scale; 0: the ratio of leg lengths (transfer.h).
  // >= 0, at most 1e6.
  double pelvis_scale = 0.0;
};

// Whether a source foot is in stance this frame: `before` its state the
// frame before, `height` its ankle's above the source's floor and `speed`
// its move since the frame before over the frame's time, both in source
// leg lengths. A foot enters stance below contact_height and
// contact_speed, and stays in it until it rises above 1.5x the height or
// moves faster than 1.5x the speed.
bool Stance(bool before, double height, double speed,
            const RetargetOptions& options);

// Checks `options`; errors name the field ("options.contact_speed").
absl::Status ValidateRetargetOptions(const RetargetOptions& options);

// One limb goal's outcome in a frame.
struct LimbResult {
  bool active = false;          // The limb had a goal this frame.
  bool reached = false;         // Within the full-body tolerances.
  double position_error = 0.0;  // Target units.
  double orientation_error_rad = 0.0;
  bool planted = false;  // Feet: held at a planted place this frame.
  // Feet: the goal is not the live one (lifted to the floor, blending
  // from a planted place, or pulled within the leg's reach).
  bool adjusted = false;
  Eigen::Vector3d goal = Eigen::Vector3d::Zero();  // Where it was sent.
};

struct RetargetFrameResult {
  std::array<LimbResult, 2> hands;  // [kLeft], [kRight].
  std::array<LimbResult, 2> feet;
  int iterations = 0;  // Of the full-body solve.
  // How far the pelvis was moved from where the transfer put it (away from
  // held feet that legs whose knees cannot fold as far as the source's
  // could not reach otherwise; target units; 0 on most frames).
  double pelvis_move = 0.0;
};

// What carries from one frame to the next (one per stream; a fresh one for
// a new clip).
struct RetargetState {
  struct Foot {
    // The source foot is in stance (Stance): low and slow.
    bool contact = false;
    // Where a held foot stays, along the floor (target space).
    Eigen::Vector3d planted = Eigen::Vector3d::Zero();
    // The foot goal's offset from the live one, along the floor: held
    // feet's, and after a release what is left to catch up.
    Eigen::Vector3d offset = Eigen::Vector3d::Zero();
    Eigen::Vector3d last_source = Eigen::Vector3d::Zero();
    double released_for = 0.0;  // Seconds since the stance ended.
    // How much this foot's stance moves the pelvis where the leg's limits
    // cannot fold it to the held foot (0 to 1, eased in and out over
    // release_seconds).
    double rise_weight = 0.0;
    // The solve left the foot short of its goal (its leg's limits held it
    // off), and where it left it (model space).
    bool held_off = false;
    Eigen::Vector3d solved = Eigen::Vector3d::Zero();
  };
  std::array<Foot, 2> feet;
  bool started = false;       // A frame was retargeted with this state.
  double source_floor = 0.0;  // Fixed by the first frame.
  double target_floor = 0.0;  // Along Retargeter::floor_up().
  // The answer of the frame before (sized once): a limited joint's twist
  // wanted beyond its range stays on this answer's side of it
  // (Transfer::Apply's `previous`).
  Pose previous;
  // The frame before's source model-space transforms and the transfer's
  // answer (before the solve), sized once: Transfer::Apply's
  // `frame_before`, which bounds how fast a limb's hinge plane turns.
  std::vector<Transform> previous_source;
  Pose previous_transferred;
};

// Reused per call (no allocation once sized).
struct RetargetScratch {
  TransferScratch transfer;
  std::vector<Goal> goals;
  std::vector<GoalResult> results;
  Workspace workspace;
  std::vector<Transform> solved_globals;  // Of the solved pose, when needed.
};

class Retargeter {
 public:
  // Both sides as for Transfer::Create (their retarget poses already chosen:
  // the rest, a frame, or AlignLimbs'); errors name the side or the option.
  static absl::StatusOr<Retargeter> Create(const RetargetSide& source,
                                           const RetargetSide& target,
                                           const RetargetOptions& options);

  // Retargets one frame: `source` is a pose of the source skeleton (checked;
  // InvalidArgument names "source.local[i]"), `dt` the seconds since the
  // previous frame of this state (> 0 and finite; the first frame's is not
  // used), `target` is written (resized to the target skeleton), `result`
  // may be null. `deadline` bounds the solve (it keeps its best pose); one
  // already expired skips it: the transferred pose, its goals measured.
  absl::Status Apply(const Pose& source, double dt, RetargetState& state,
                     RetargetScratch& scratch, Pose* target,
                     RetargetFrameResult* result,
                     const Deadline& deadline = {}) const;

  const Transfer& transfer() const { return transfer_; }
  // The target skeleton the full-body solve runs on: the target's joints
  // with stiffness 1 everywhere but the limbs.
  const Skeleton& solving_skeleton() const { return solving_; }
  // The source's vertical (floor normal), model axis.
  const Eigen::Vector3d& source_vertical() const { return source_up_; }
  // The target's floor: points x with floor_up().dot(x) ==
  // RetargetState::target_floor are on it.
  const Eigen::Vector3d& floor_up() const { return floor_up_; }
  const RetargetOptions& options() const { return options_; }

 private:
  Retargeter(Transfer transfer, Skeleton solving)
      : transfer_(std::move(transfer)), solving_(std::move(solving)) {}

  struct Limb {
    int start = -1;              // Upper arm, thigh.
    int middle = -1;             // Forearm, shin (-1: none, no pole).
    int end = -1;                // Hand, foot.
    double source_length = 0.0;  // Along the limb, retarget pose.
    double target_length = 0.0;
    int source_start = -1;
    int source_end = -1;
    // The way the limb bends (knees forward, elbows back) in the target's
    // retarget pose, and its start joint's rotation there, inverted.
    Eigen::Vector3d bend_ref = Eigen::Vector3d::Zero();
    Eigen::Quaterniond start_ref_inverse = Eigen::Quaterniond::Identity();
    // The path from start to end, a bone at a time: the joint whose
    // source's turn the bone follows (the bone's own, or for an unmapped
    // joint such as a twist bone the nearest mapped one above it; -1:
    // none, it keeps its retarget direction) and the bone (to the next
    // joint on the path) in the target's retarget pose, model space.
    struct Bone {
      int turned_by = -1;
      Eigen::Vector3d offset = Eigen::Vector3d::Zero();
    };
    std::vector<Bone> bones;
    // The nearest the end can come to the start within the middle joint's
    // limits (a knee's range of bend), the other joints as in the rest
    // pose; 0 when the middle joint has no limits.
    double min_reach = 0.0;
    // A joint from start to end has limits.
    bool limited = false;
  };

  Transfer transfer_;
  Skeleton solving_;
  const Skeleton* source_skeleton_ = nullptr;
  RetargetOptions options_;
  std::array<Limb, 2> arms_;  // end < 0: no IK on that arm.
  std::array<Limb, 2> legs_;
  int pelvis_ = -1;  // The target's pelvis joint (the transfer places it).
  Eigen::Vector3d source_up_ = Eigen::Vector3d::UnitY();
  Eigen::Vector3d floor_up_ = Eigen::Vector3d::UnitY();
  FullBodyOptions full_body_;
  double tolerance_ = 0.0;  // Goal position tolerance, target units.
};

}  // namespace reach::retarget

#endif  // REACH_RETARGET_RETARGETER_H_
