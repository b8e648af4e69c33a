// One retarget frame on the wire: a source pose in, the profile's
// retargeter run, the target pose and the limbs' outcomes out. Shared by
// Retarget, RetargetBatch and RetargetStream; no transport here.
#ifndef REACH_SERVER_RETARGET_CALL_H_
#define REACH_SERVER_RETARGET_CALL_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "reach/v1/retarget.pb.h"
#include "retarget/quality.h"
#include "retarget/retargeter.h"
#include "solvers/deadline.h"
#include "solvers/pose.h"

namespace reach {

struct BuiltRetargetProfile;
class Metrics;

// A worker's reusable buffers (no allocation once sized, but for the
// response message).
struct RetargetFrameScratch {
  Pose source;
  Pose target;
  retarget::RetargetScratch work;
  retarget::RetargetFrameResult result;
  std::vector<Transform> globals;
};

// The seconds a request's frame_time_s means (0: 1/30 s), or
// InvalidArgument naming `field` when outside [0, 10] or not finite.
absl::Status FrameTime(double frame_time_s, absl::string_view field,
                       double* seconds);

// Retargets `source` (a pose of the profile's source skeleton; errors name
// `field`, e.g. "frames[3].rotations[2]") with `state` into `out` (cleared
// first; its sequence is left for the caller). `dt`: seconds since the
// state's previous frame.
// The frame is counted in `metrics` (may be null).
absl::Status RetargetFrame(const BuiltRetargetProfile& profile,
                           const v1::Pose& source, absl::string_view field,
                           double dt, bool return_globals,
                           retarget::RetargetState& state,
                           RetargetFrameScratch& scratch,
                           const Deadline& deadline, Metrics* metrics,
                           v1::RetargetResponse* out);

// The figures of `quality` on the wire (joints by name).
void ToProto(const Skeleton& target, const retarget::RetargetQuality& quality,
             v1::RetargetQuality* out);

// Bytes a RetargetResponse for `joints` target joints takes at most.
int64_t RetargetResponseBound(int joints, bool return_globals);

}  // namespace reach

#endif  // REACH_SERVER_RETARGET_CALL_H_
