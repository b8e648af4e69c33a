// The viewer's window on live streams (SolveStream and RetargetStream):
// every open stream is listed here (id, owner, skeleton, frames), and while
// someone watches it, each answered frame's pose, targets and poles (and a
// retarget's source pose) are copied into a one-frame slot that the viewer
// samples (latest wins: frames answered between two samples are never
// seen, never queued). Unwatched, a frame costs the stream one relaxed
// atomic increment and one atomic load.
#ifndef REACH_SERVER_STREAM_WATCH_H_
#define REACH_SERVER_STREAM_WATCH_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "reach/v1/solve.pb.h"
#include "solvers/goal.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"

namespace reach {

// One frame as the viewer draws it.
struct StreamFrame {
  uint64_t version = 0;  // Frames published before and including this one.
  std::string skeleton_id;  // The solved skeleton (a retarget's target).
  uint64_t sequence = 0;  // The request's.
  // Per joint, local: rotation (w, x, y, z) and translation (x, y, z).
  std::vector<double> rotations;
  std::vector<double> translations;
  // A RetargetStream's frame: its profile and the source pose it was
  // given (empty for a SolveStream).
  std::string profile_id;
  std::string source_skeleton_id;
  std::vector<double> source_rotations;
  std::vector<double> source_translations;
  struct Goal {
    int effector = -1;  // Joint index; -1 when the name is unknown.
    bool has_target = false, has_pole = false;
    double target[3] = {0, 0, 0};
    double pole[3] = {0, 0, 0};
    bool reached = false;
    double position_error = 0;
  };
  std::vector<Goal> goals;
};

// The frame as JSON: {"stream": ID, "version", "kind": "solve" or
// "retarget", "skeletonId", "sequence", "rotations": [...],
// "translations": [...], "goals": [{"effector", "target": [x, y, z] (or
// null), "pole", "reached", "positionError"}]}; a retarget frame adds
// "profileId", "sourceSkeletonId", "sourceRotations" and
// "sourceTranslations" (the source pose, as "rotations" and
// "translations"). Goals are in the solved skeleton's model space.
std::string StreamFrameJson(int64_t stream, const StreamFrame& frame);

class WatchedStream {
 public:
  // `retarget`: a RetargetStream (else a SolveStream).
  WatchedStream(int64_t id, std::string owner, bool retarget)
      : id_(id),
        owner_(std::move(owner)),
        retarget_(retarget),
        started_(absl::Now()) {}

  int64_t id() const { return id_; }
  // "solve" or "retarget".
  const char* kind() const { return retarget_ ? "retarget" : "solve"; }
  const std::string& owner() const { return owner_; }
  absl::Time started() const { return started_; }
  int64_t frames() const { return frames_.load(std::memory_order_relaxed); }
  int watchers() const { return watchers_.load(std::memory_order_relaxed); }
  bool ended() const { return ended_.load(std::memory_order_acquire); }
  // What the stream solves on, read together (a RetargetStream switching
  // profile never shows one profile with another's source).
  struct Ids {
    std::string skeleton_id;  // The solved skeleton (a RetargetStream's target).
    // A RetargetStream's profile and source skeleton ("" otherwise).
    std::string profile_id;
    std::string source_skeleton_id;
  };
  Ids ids() const;

  // The stream's skeleton, when it changes (before its first frame).
  void SetSkeleton(const std::string& skeleton_id);
  // A RetargetStream's profile, when it changes (before its first frame).
  void SetRetarget(const std::string& profile_id,
                   const std::string& source_skeleton_id,
                   const std::string& target_skeleton_id);
  // The solver's thread, after each solved frame (`pose`: the solution).
  // Copies the frame only while watched; reuses the slot's capacity.
  void Published(const Skeleton& skeleton, const std::string& skeleton_id,
                 const v1::SolveRequest& request, const Pose& pose,
                 const v1::SolveResponse& response);
  // Likewise after each retargeted frame: `source` the pose given, `target`
  // the answer, `goals` and `results` the retargeter's limb goals (target
  // model space) and how they were met.
  void PublishedRetarget(const Skeleton& target_skeleton, uint64_t sequence,
                         const Pose& source, const Pose& target,
                         absl::Span<const Goal> goals,
                         absl::Span<const GoalResult> results);

  // The viewer: copies the latest frame into *out when its version is
  // newer than `after`.
  bool Latest(uint64_t after, StreamFrame* out) const;

  void AddWatcher() { watchers_.fetch_add(1, std::memory_order_relaxed); }
  void RemoveWatcher() { watchers_.fetch_sub(1, std::memory_order_relaxed); }
  void End() { ended_.store(true, std::memory_order_release); }

 private:
  const int64_t id_;
  const std::string owner_;
  const bool retarget_;
  const absl::Time started_;
  std::atomic<int64_t> frames_{0};
  std::atomic<int> watchers_{0};
  std::atomic<bool> ended_{false};
  mutable absl::Mutex mu_;
  StreamFrame latest_ ABSL_GUARDED_BY(mu_);
  std::string skeleton_id_ ABSL_GUARDED_BY(mu_);
  std::string profile_id_ ABSL_GUARDED_BY(mu_);
  std::string source_skeleton_id_ ABSL_GUARDED_BY(mu_);
};

class StreamWatch {
 public:
  // A stream opened by `owner` (the caller's name).
  std::shared_ptr<WatchedStream> Add(std::string owner, bool retarget);
  // The stream ended: it is marked so, and no longer listed.
  void Remove(const std::shared_ptr<WatchedStream>& stream);
  std::vector<std::shared_ptr<WatchedStream>> List() const;
  std::shared_ptr<WatchedStream> Find(int64_t id) const;

 private:
  mutable absl::Mutex mu_;
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<std::shared_ptr<WatchedStream>> streams_ ABSL_GUARDED_BY(mu_);
};

}  // namespace reach

#endif  // REACH_SERVER_STREAM_WATCH_H_
