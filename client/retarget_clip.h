// Retargeting a recorded clip through the service (reach.v1.RetargetService):
// the client sends files and frames, the server does all the work. Both
// skeletons are imported by the server from the files' bytes, a profile is
// made from them, and the clip's frames are retargeted in order, either a
// batch at a time (RetargetBatch: offline, as fast as the server goes) or
// live over RetargetStream at the clip's rate (latency measured per frame).
#ifndef REACH_CLIENT_RETARGET_CLIP_H_
#define REACH_CLIENT_RETARGET_CLIP_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/reach_client.h"
#include "reach/v1/retarget.pb.h"

namespace reach::client {

struct RetargetClipOptions {
  // A skeleton file (.bvh, .gltf, .glb, .json, .urdf) or the id of a
  // registered skeleton.
  std::string target;
  // The frame of the source clip (or of a BVH target) that is its
  // retarget pose; -1: the rest pose. For rigs whose rest is no stance.
  int source_reference_frame = -1;
  int target_reference_frame = -1;
  // Profile options (spec.source/target are filled here; the rest is
  // sent as given: keep_target_pose, no_planting, pelvis_scale, ...).
  v1::RetargetProfileSpec spec;
  int first_frame = 0;
  int max_frames = -1;  // -1: to the end of the clip.
  // Offline: frames per RetargetBatch call, at most; a call also stays
  // under 8 MiB of request (the server's --max_message_bytes is 16 MiB)
  // and its frames share the server's --max_solve_ms (500 ms by default:
  // 4000 frames of 30 us leave room for a busy server). Each call starts a
  // new state: feet in contact at a call's first frame are planted afresh
  // there.
  int batch_frames = 4000;
  // Live: RetargetStream, paced at `fps` (0: the clip's rate; < 0: as
  // fast as the window allows), at most `max_in_flight` frames unanswered.
  bool live = false;
  double fps = 0;
  int max_in_flight = 8;
  bool latest_wins = false;
  // Also measure the retarget's quality (RetargetBatchRequest.report); live,
  // by a batch of the same frames after the stream, whose answers must be
  // the stream's (counted in RetargetClipResult::live_mismatches).
  bool report = false;
  absl::Duration timeout = absl::Seconds(10);  // Slack on the deadline.
  // Called on the sending thread every few frames with (sent, total).
  std::function<void(int, int)> progress;
};

struct RetargetClipResult {
  v1::RetargetProfile profile;
  v1::Skeleton source;  // As the server registered them.
  v1::Skeleton target;
  double frame_time_s = 0;
  // The frames sent (source poses) and their answers, in order; a skipped
  // frame (latest wins) has an answer with skipped set.
  std::vector<v1::Pose> source_frames;
  std::vector<v1::RetargetResponse> answers;
  int skipped = 0;
  // Live: frames answered with an in-band error, and the first.
  int errors = 0;
  std::string first_error;
  // Offline: frames past a call's solve time (iterations 0, not solved).
  int unsolved = 0;
  double seconds = 0;  // From the first frame sent to the last answer.
  double fps = 0;      // Frames answered per second.
  // Live: round trips.
  absl::Duration p50, p99, max_latency;
  // With report: one per RetargetBatch call (usually one).
  std::vector<v1::RetargetQuality> quality;
  // Live with report and no frame skipped: answered frames whose pose
  // differs from the batch's.
  int live_mismatches = 0;
};

// Retargets the BVH clip `source_file` onto options.target. Errors name
// the file, the flag's value or the RPC.
absl::StatusOr<RetargetClipResult> RetargetClip(
    ReachClient& client, const std::string& source_file,
    const RetargetClipOptions& options);

}  // namespace reach::client

#endif  // REACH_CLIENT_RETARGET_CLIP_H_
