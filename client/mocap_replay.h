// Recorded motion as a stream of IK goals (`reach stream`): each frame of a
// BVH clip becomes a SolveRequest for a registered skeleton (the clip's
// own, or another rig with the same chain and joint names and other
// proportions), streamed with back-pressure, and the answers are checked
// by forward kinematics here, on the client. A load of solver frames, not
// retargeting between rigs: that is the server's (RetargetService,
// client/retarget_clip.h, `reach retarget`).
//
// Per frame and per limb chain (a chain name both skeletons have, such as
// "left_arm"): the target is the source tip's position relative to the
// source chain root, scaled by the ratio of the chains' rest lengths, and
// placed at the target chain's root; the pole is the source's middle joint,
// mapped the same way, so the elbow or knee bends as it did in the capture.
// Joints outside the chains take the frame's local rotations by joint name
// (the rest rotation where a name is missing), the root translation scaled
// by the legs' ratio. The chain joints start from the previous frame's
// captured rotations: a warm start the solver must still correct.
#ifndef REACH_CLIENT_MOCAP_REPLAY_H_
#define REACH_CLIENT_MOCAP_REPLAY_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "importers/bvh.h"
#include "client/reach_client.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"

namespace reach::client {

// Vertical (Y) extent of the joints' model-space positions.
double PoseHeight(const Skeleton& skeleton, const Pose& pose);

// Maps frames of a clip onto a target skeleton.
class MocapRetarget {
 public:
  // `chains` names the chains to drive; empty means every chain the clip's
  // skeleton and `target` share. Every joint of `target` must have a
  // same-named joint in the clip. Errors name the missing chain or joints.
  static absl::StatusOr<MocapRetarget> Create(
      const import::BvhClip& clip, const Skeleton& target,
      std::vector<std::string> chains = {});

  // The start pose, goals and per-goal targets of `frame`. `request` keeps
  // its skeleton_id, sequence and flags; goals and start pose are replaced.
  void BuildFrame(int frame, v1::SolveRequest* request, Pose* start,
                  std::vector<Eigen::Vector3d>* targets);

  const import::BvhClip& clip() const { return *clip_; }
  const Skeleton& source() const { return source_; }
  const Skeleton& target() const { return *target_; }
  const std::vector<std::string>& chains() const { return chain_names_; }
  // Target chain tips, one per chain.
  const std::vector<int>& target_tips() const { return target_tips_; }
  v1::Solver solver = v1::SOLVER_AUTO;

 private:
  struct Limb {
    std::vector<int> source_path;  // Root .. tip.
    std::vector<int> target_path;
    double scale = 1;
  };
  MocapRetarget(const import::BvhClip& clip, Skeleton source,
                const Skeleton& target);

  const import::BvhClip* clip_;
  Skeleton source_;
  const Skeleton* target_;
  std::vector<std::string> chain_names_;
  std::vector<Limb> limbs_;
  std::vector<int> target_tips_;
  std::vector<int> source_of_target_;   // Per target joint; -1: none.
  std::vector<bool> warm_started_;      // Per target joint: in a chain.
  double root_scale_ = 1;
  Pose frame_, previous_;  // The clip at frame_index_ and the frame before.
  int frame_index_ = -2;
  std::vector<Transform> source_globals_, target_globals_;
};

struct ReplayOptions {
  double fps = 0;            // Frames per second to pace at; 0: max rate.
  bool latest_wins = false;  // Mark frames latest_wins (live mocap).
  int max_in_flight = 8;     // Frames sent and not yet answered.
  int first_frame = 0;
  int max_frames = -1;       // -1: to the end of the clip.
  bool keep_poses = false;   // Fill ReplayReport::poses.
  absl::Duration timeout = absl::Seconds(10);  // Slack on the deadline.
  // Called on the sending thread every few frames with (sent, total).
  std::function<void(int, int)> progress;
};

struct ReplayReport {
  int frames = 0;    // Sent.
  int solved = 0;    // Answered with a pose.
  int skipped = 0;   // Answered `skipped` (latest wins).
  int errors = 0;    // Answered with an in-band error.
  std::string first_error;
  int goals = 0;     // Goals checked.
  // |FK(tip) - target| of the returned poses, model units.
  double mean_error = 0;
  double max_error = 0;
  double mean_server_error = 0;  // The server's own position_error.
  // |FK(tip) - target| of the start poses sent: the work the solver did.
  double mean_start_error = 0;
  double source_height = 0;      // PoseHeight of the first frame.
  double target_height = 0;
  double seconds = 0;
  double fps = 0;                // Frames answered per second.
  absl::Duration p50, p99, max_latency;
  // Times the stream reopened (ClientOptions::resume_streams).
  int resumes = 0;
  std::vector<Pose> poses;       // Per frame when keep_poses; a skipped or
                                 // failed frame repeats the previous pose.
};

// Streams the retarget's clip onto the registered skeleton `skeleton_id`
// (whose definition is retarget.target()) and checks every answer.
absl::StatusOr<ReplayReport> ReplayMocap(ReachClient& client,
                                         const std::string& skeleton_id,
                                         MocapRetarget& retarget,
                                         const ReplayOptions& options);

}  // namespace reach::client

#endif  // REACH_CLIENT_MOCAP_REPLAY_H_
