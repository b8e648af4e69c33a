// Motion quality of SOLVER_FULL_BODY against the performer, joint by joint:
// a BVH clip's hands, feet and head followed frame after frame on the
// clip's own skeleton, and the solved body compared with the performer's
// by the tests' own forward kinematics (IndependentFk, tests/testing/
// sweep.h), never the library's. Shared by tests and by
// bench/full_body_motion_bench.cc (scripts/bench-full-body-motion).
//
// Protocol (per clip and mode):
// - The clip is imported with import::ImportBvh and solved on
//   Skeleton::Create(clip->skeleton.def) as it is (no stiffness, no limits
//   added). Frame 0 of the CMU MotionBuilder clips is a T-pose reference:
//   the evaluation starts at frame 1 and takes every frame, or every k-th
//   (k = round(fps / 30)) in the 30 Hz modes.
// - Effectors: the tips of the chains left_leg, right_leg (feet, priority
//   0), left_arm, right_arm (hands, priority 1) and the head (the first
//   joint whose name ends in "head", any case; priority 1). Targets: the
//   performer's effector positions, and with `orientation` its effector
//   rotations too. Tolerance 1e-4 x BodySize(skeleton). No poles.
// - "sparse": head and hands with orientation every frame; a foot (position
//   and orientation, priority 0) only on the frames the performer plants
//   it: its height above the clip's lowest foot height (both feet, every
//   frame from 1) under 0.05 x the performer's height, and its speed (from
//   the clip frame before, at the clip's rate, so the same frames in both
//   rates) under 0.5 x the height per second.
// - Warm-started: one pose carried from frame to frame (the first from
//   RestPose), one Workspace, reach::Solve with FullBodyOptions (the root
//   free). Every `cold_every`-th evaluated frame is also solved from
//   RestPose (a workspace of its own) and compared with the warm answer.
//
// Joint roles (how they are found; the notes of a report name them):
// - pelvis: the skeleton's root, joint 0.
// - up axis: the rest pose's head minus root, snapped to the nearest model
//   axis (with its sign); heights are along it and the floor is square to
//   it (+Y on the five BVH clips).
// - hip sockets ("thighs"): the leg chain's root, or, when that joint sits
//   on its parent (a zero rest translation: a helper like LHipJoint), the
//   first joint down the chain with a non-zero rest translation. The
//   shoulders (arm roots) likewise. Knee / elbow: the chain's joint before
//   its tip; ankle / wrist: the tip.
// - chest: the lowest common ancestor of the two arm chains' roots (where
//   the arms branch off the spine: Spine1 on the CMU MotionBuilder rigs,
//   Chest2 on the 3dsMax one, CC_Base_Spine02 on Character Creator);
//   neck base: the chest's child on the path to the head. Trunk direction:
//   pelvis -> neck base.
// - spine and clavicles (angular speed): joints whose lower-case name
//   holds "spine", "back", "chest", "waist", "clavicle", "collar" or
//   "shoulder" but not "arm", and that are on no limb chain (CMU
//   MotionBuilder's LeftShoulder is the clavicle; 3dsMax's LeftShoulder is
//   the upper arm, the arm chain's root, so it is left out and its
//   LeftCollar taken; "collar" and "waist" name the 3dsMax clavicle and the
//   Character Creator's lowest spine joint).
// - regions (per-frame steps): legs = the subtrees of the children of the
//   legs' branch point (the lowest common ancestor of the leg roots) that
//   lead to a leg; left / right arm = the subtree of the chest's child that
//   leads to that arm (clavicle, arm, hand, fingers); spine+neck+head =
//   every other joint (pelvis included).
// - MPJPE joints: every joint but those below a hand or a foot (fingers,
//   toes and their End Sites), the End Sites the importer adds (fixed
//   leaves named "<parent>_End") and any other leaf with a zero rest
//   translation.
//
// Units: reports are in centimetres, degrees and seconds. The clip's unit
// is read from its performer height h = BodySize of the rest pose:
// h > 100 -> centimetres (the Character Creator clip: 132.5, 1.33 m);
// 15 <= h <= 100 -> CMU units, 1 unit = 1/0.45 inch = 0.0564444 m (the
// MotionBuilder / 3dsMax conversions: 24-26, 1.37-1.48 m; BodySize is
// the rest pose's largest extent, root to head joint and feet, not the
// top of the head); 0.5 <= h <= 3 -> metres;
// anything else -> a 1.7 m performer assumed (metres = units x 1.7 / h).
// MotionEvalOptions::metres_per_unit overrides the guess.
#ifndef REACH_TESTS_TESTING_MOTION_EVAL_H_
#define REACH_TESTS_TESTING_MOTION_EVAL_H_

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "solvers/goal.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"

namespace reach::testing {

struct MotionEvalOptions {
  bool thirty_hz = false;    // Every round(fps / 30)-th frame.
  bool orientation = true;   // Effector orientation targets (not sparse).
  bool sparse = false;       // Head + hands, feet only while planted.
  // Trackers: head + hands only (orientation every frame), the feet's goals
  // on the first evaluated frame alone (a tracker session's calibration,
  // standing where the performer stands), FullBodyOptions::plant_feet set.
  bool trackers = false;
  // Trackers: the floor (FullBodyOptions::plant_height) is the calibration
  // frame's lower foot, as a tracker session that calibrates on its first
  // frame knows it.
  bool tracker_floor = true;
  int max_iterations = 0;    // FullBodyOptions::max_iterations (0: 64).
  int cold_every = 50;       // Cold solve every N evaluated frames; 0: none.
  FullBodyOptions solver;    // max_iterations above replaces its own.
  int first_frame = 1;       // Frame 0 of the CMU clips is a T-pose.
  // Stop after this clip frame (the last evaluated frame at or before it)
  // and keep both bodies of that frame in MotionReport::snapshot; -1: the
  // whole clip, no snapshot.
  int last_frame = -1;
  double metres_per_unit = 0.0;  // 0: guessed from the height (above).
  // A clip whose all-zero pose does not stand (its feet not below its
  // hips: a Character Creator export holds every limb up) is imported with
  // its first frame as the rest pose when that frame stands
  // (import::BvhClip::UseFrameAsRest; `reach register --rest-frame 0`),
  // so the body model has a posture and flexion axes.
  bool standing_rest = false;
};

// The mode's name: "clip", "30hz", "clip-noorient", "30hz-noorient",
// "sparse", "sparse-30hz", "trackers", "trackers-30hz".
std::string ModeName(const MotionEvalOptions& options);
// Options of a mode by that name (also "noorient" for "clip-noorient");
// nullopt for an unknown name.
std::optional<MotionEvalOptions> ModeOptions(const std::string& name);
// The six modes of the matrix: clip, 30hz, clip-noorient, 30hz-noorient,
// sparse, trackers.
std::vector<std::string> AllModeNames();

// The up axis derived from a rest pose: `index` 0..2 (X, Y, Z), `sign`
// +-1, `dir` the unit vector.
struct UpAxis {
  int index = 1;
  double sign = 1.0;
  Eigen::Vector3d dir = Eigen::Vector3d::UnitY();
};
// The rest pose's (IndependentFk of RestPose) head minus root, snapped to
// the nearest model axis.
UpAxis DeriveUpAxis(const Skeleton& skeleton, int head);

// The first joint whose name ends in "head" (any case), or -1.
int FindHeadJoint(const Skeleton& skeleton);

// The joint roles above, found on a skeleton with the four limb chains.
struct BodyRoles {
  int pelvis = 0;
  int head = -1;
  int chest = -1;
  int neck_base = -1;
  int leg_branch = -1;  // Lowest common ancestor of the leg roots.
  // [left, right] x [socket/shoulder, knee/elbow, ankle/wrist].
  std::array<std::array<int, 3>, 2> legs{};
  std::array<std::array<int, 3>, 2> arms{};
  std::vector<int> spine_joints;   // Spine and clavicles (angular speed).
  std::vector<int> region;         // Per joint: 0 legs, 1 spine+neck+head,
                                   // 2 left arm, 3 right arm.
  std::vector<char> mpjpe_joint;   // Per joint: counted in MPJPE.
  std::vector<char> end_site;      // Per joint: an End-Site-like leaf.
  UpAxis up;
};
absl::StatusOr<BodyRoles> FindBodyRoles(const Skeleton& skeleton);

inline constexpr std::array<const char*, 4> kRegionNames = {
    "legs", "spine", "left_arm", "right_arm"};

// Both bodies of one frame (model space, clip units), for pictures.
struct MotionSnapshot {
  int frame = 0;                           // Clip frame.
  std::vector<int> parent;                 // Per joint.
  std::vector<char> drawn;                 // Per joint: a bone to draw.
  std::vector<Eigen::Vector3d> performer;  // Per joint.
  std::vector<Eigen::Vector3d> solved;     // Per joint.
  std::vector<int> effectors;              // Joints with goals this frame.
  UpAxis up;
  double floor_height = 0.0;  // The clip's lowest foot height.
};

// Every metric of one clip in one mode. Lengths in centimetres, angles in
// degrees, times in seconds unless named otherwise.
struct MotionReport {
  std::string clip;  // File name.
  std::string mode;
  int frames = 0;            // Evaluated frames.
  double fps = 0.0;          // Evaluated rate.
  double clip_fps = 0.0;
  int step = 1;              // Clip frames per evaluated frame.
  double height_units = 0.0;     // Performer height, clip units.
  double metres_per_unit = 0.0;
  int solve_errors = 0;      // Solve returned an error (frame skipped).

  // 1. Effector errors over every goal of every frame.
  int goals = 0;
  double effector_p99_cm = 0.0;
  double effector_max_cm = 0.0;
  bool orientation_used = false;
  double orientation_p99_deg = 0.0;
  double orientation_max_deg = 0.0;
  int unreached = 0;  // Goals GoalResult calls unreached.
  int planted_frames[2] = {0, 0};  // Sparse: frames each foot had a goal.

  // 2. Pelvis height along the up axis, |solved - performer|.
  double pelvis_height_max_cm = 0.0;
  double pelvis_height_mean_cm = 0.0;
  int pelvis_height_worst_frame = -1;  // Clip frame.
  // On frames where a performer's foot is planted (low and slow), the
  // lower solved foot's height above the performer's lower foot, max
  // (a body that stands where the performer stands).
  double stand_height_max_cm = 0.0;

  // 3. Hip line (left socket - right socket) on the floor plane.
  double heading_max_deg = 0.0;
  int heading_over_45 = 0;
  int heading_worst_frame = -1;

  // 4. Trunk.
  int chest_below_pelvis = 0;            // Solved frames.
  int performer_chest_below_pelvis = 0;  // For reference.
  double trunk_max_deg = 0.0;            // Pelvis -> neck base direction.
  double trunk_mean_deg = 0.0;
  int trunk_worst_frame = -1;

  // 5. Bend flips (solved bend . performer bend <= 0 where the performer's
  // bend exceeds 0.05 of root -> mid): [left, right].
  int knee_flips[2] = {0, 0};
  int elbow_flips[2] = {0, 0};
  int flips = 0;  // Total.
  int first_flip_frame = -1;  // Clip frame; -1: none.

  // 6. Fixed offsets: max over frames of |d / d_rest - 1|.
  double hip_socket_change = 0.0;   // Fraction (x100 for %).
  double bone_length_change = 0.0;  // Worst bone of any frame, fraction.

  // 7. Jitter: mean |third difference| x fps^3 per joint, solved over
  // performer.
  double jitter_ratio_all = 0.0;  // Sum over joints / sum over joints.
  double jitter_ratio_worst = 0.0;
  std::string jitter_worst_joint;
  int still_joints_moved = 0;  // Performer jitter ~0, solved not.

  // 8. Spine and clavicles: mean local angular speed, deg/s.
  double spine_excess_deg_s = 0.0;  // Worst (solved - 1.5 x performer).
  std::string spine_excess_joint;
  double spine_solved_deg_s = 0.0;     // Of that joint.
  double spine_performer_deg_s = 0.0;  // Of that joint.

  // 9. Largest per-frame model-space step per region, solved over the
  // performer's (the bar: 2).
  std::array<double, 4> region_step_ratio{};  // kRegionNames order.
  double region_step_worst = 0.0;
  std::string region_step_worst_region;
  std::string region_step_worst_joint;  // Solved joint of the largest step.

  // 10. Mean per-joint position error (MPJPE joints), cm.
  double mpjpe_cm = 0.0;
  double mpjpe_max_frame_cm = 0.0;  // Worst frame's mean.
  int mpjpe_worst_frame = -1;

  // Warm against cold (from RestPose), every cold_every-th frame: the
  // largest joint distance (MPJPE joints) of any sampled frame, and the
  // largest per-frame mean.
  int cold_frames = 0;
  double warm_cold_max_cm = 0.0;
  double warm_cold_mean_cm = 0.0;
  double cold_iterations_mean = 0.0;

  // 11. Printed, never asserted.
  double iterations_mean = 0.0;
  double solve_us_mean = 0.0;
  double wall_seconds = 0.0;  // The whole evaluation.

  std::vector<std::string> notes;
  std::optional<MotionSnapshot> snapshot;
};

// Evaluates one clip in one mode.
absl::StatusOr<MotionReport> EvaluateClip(const std::string& bvh_path,
                                          const MotionEvalOptions& options);

// One line of the metrics, and a second of the notes' joint choices.
std::string FormatReport(const MotionReport& report);

// The Markdown table's header (two lines) and one report's row.
std::string MarkdownHeader();
std::string MarkdownRow(const MotionReport& report);

// An SVG (1200 x 700) of a report's snapshot: front (the two axes other
// than up, first the lower-numbered one: X-Y for Y-up) and side views, the
// performer's bones grey, the solved red, goal targets as circles, labelled
// with clip, frame and mode. Empty without a snapshot.
std::string SnapshotSvg(const MotionReport& report);

}  // namespace reach::testing

#endif  // REACH_TESTS_TESTING_MOTION_EVAL_H_
