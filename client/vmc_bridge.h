// `reach vmc`: a live VMC performance retargeted by the server onto a
// registered rig and sent on as VMC.
//
//   performer --VMC/UDP--> VmcBridge --RetargetStream--> reach-server
//   receiver  <--VMC/UDP-- VmcBridge <--------------------'
//
// The bridge runs beside the mocap software (a client of the server, like
// `reach retarget --live`: the server stays free of UDP and OSC). At start
// it imports the source skeleton (the VMC humanoid: a HumanBodyBones rig,
// by default examples/vmc_humanoid.skeleton.json, built in) and the target
// on the server, makes a retarget profile and opens one RetargetStream.
// Then three threads:
// - receive: one UDP datagram at a time, decoded and applied
//   (vmc::VmcReceiver); each packet that set bones is a frame, put in a
//   one-frame slot (latest wins: a frame not yet sent when the next one
//   arrives is superseded, counted);
// - send: takes the slot's frame and sends it on the stream (frame time:
//   the difference of the sender's /VMC/Ext/T, else of arrival), at most
//   max_in_flight unanswered, latest_wins set; a frame that finds room in
//   the window and no send under way is sent by the receive thread itself
//   (send_from_receive_thread), the send thread taking the frames that
//   waited;
// - answer: each answer, in order, written as one VMC bundle
//   (vmc::VmcPoseWriter) with the frame's sender time and sent to the
//   receiver.
// Tracker mode (VmcBridgeOptions::trackers, `reach vmc --trackers`): the
// frames are the packets that set a tracker (/VMC/Ext/Hmd|Con|Tra/Pos);
// vmc::TrackerMap gives each serial a body part, and each frame becomes a
// SolveStream request on the target of full-body goals (HMD: the head's
// position and turn, controllers: the hands, named trackers: the pelvis and
// feet; FullBodyOptions::plant_feet, so feet without a tracker stay where
// they stand). No retarget profile: the target's roles come from
// characterising it here (the code the server runs, solvers/characterize.h).
// Bad input never stops it: every datagram is counted by what became of it
// (counts(), PrometheusText()). A stream broken by UNAVAILABLE (the server
// restarted, its replica killed or drained) is reopened, for up to
// reconnect_within after the break (client/reach_client.h's resuming
// FrameStreamClient: the frames sent and not answered go out again on the
// new call, in order, and a SolveStream goes on warm from the last answered
// pose); meanwhile the receive thread goes on and the slot keeps only the
// newest frame. Any other break (or none reopened in time) ends the bridge
// with its status (Wait).
#ifndef REACH_CLIENT_VMC_BRIDGE_H_
#define REACH_CLIENT_VMC_BRIDGE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/reach_client.h"
#include "client/vmc.h"
#include "reach/v1/retarget.pb.h"
#include "reach/v1/solve.pb.h"

namespace reach::client {

// The built-in VMC humanoid (examples/vmc_humanoid.skeleton.json).
extern const char kVmcHumanoidJson[];

struct VmcBridgeOptions {
  // host:port (IPv4) to receive VMC on, and to send the retargeted VMC to.
  // Port 0 on listen: one the kernel picks (port()).
  std::string listen = "127.0.0.1:39539";
  std::string send_to = "127.0.0.1:39540";
  // The source skeleton: a file whose joints carry HumanBodyBones names
  // (the performer's avatar, for raw VRM 1.0 bones), or "" for the built-in
  // normalised T-pose humanoid.
  std::string source;
  // The target: a skeleton file or a registered skeleton id; a BVH
  // target's frame as its retarget pose (-1: its rest).
  std::string target;
  int target_reference_frame = -1;
  // Profile options (source and target ids are filled in).
  v1::RetargetProfileSpec spec;
  vmc::BoneMode bones = vmc::BoneMode::kNormalized;
  double scale = 1;  // Metres per target unit, for the positions sent.
  int max_in_flight = 2;
  // A frame that finds room in the window is sent by the thread that read
  // its datagram (one thread hop less, which under load is a wait for a
  // core less); false: always handed to the send thread (for measuring).
  bool send_from_receive_thread = true;
  // Tracker mode: a SolveStream of full-body goals from the trackers
  // instead of a RetargetStream of the bones (source, spec and
  // target_reference_frame's profile are unused; target_reference_frame
  // is still the pose the head's turn is relative to and the first frame
  // starts from). Tracker positions are metres: divided by `scale` into
  // target units.
  bool trackers = false;
  vmc::TrackerAssignment assignment;
  // Where the trackers sit on the body (`--tracker-offsets FILE`).
  vmc::TrackerOffsets tracker_offsets;
  // The full-body options of every solve (plant_feet is always set).
  v1::FullBodyOptions full_body;
  // How long after a break (UNAVAILABLE) the stream may take to reopen;
  // zero: a break ends the bridge. The server's registry must still hold
  // the profile and rigs (the default SQLite registry, or a shared one).
  absl::Duration reconnect_within = absl::Seconds(60);
  // The stream's deadline: the longest a bridge runs.
  absl::Duration max_duration = absl::Hours(24 * 7);
  osc::Limits limits;
};

struct VmcBridgeCounts {
  vmc::ReceiveCounts receive;
  uint64_t packets_truncated = 0;  // Datagrams over 64 KiB: dropped.
  uint64_t frames_superseded = 0;  // Replaced in the slot before sending.
  uint64_t frames_sent = 0;
  uint64_t frames_answered = 0;
  uint64_t frames_skipped = 0;  // Answered as skipped by the server.
  uint64_t frames_errors = 0;   // Answered with an error.
  uint64_t frames_out = 0;      // VMC bundles sent.
  // Tracker mode: tracker messages that drove a body part, and those whose
  // serial drives none (not named by a flag, a second HMD, a third
  // controller); frames whose trackers drove nothing (not sent).
  uint64_t trackers_applied = 0;
  uint64_t trackers_unknown_serial = 0;
  uint64_t frames_no_goal = 0;
  // Times the stream was reopened after a break.
  uint64_t stream_resumes = 0;
  // UDP in -> UDP out inside the bridge, over the last 4096 frames out.
  absl::Duration p50, p99, max;
  // Where that time goes, p99 of each stage over the same frames (each
  // stage's own p99: they do not add up to the total's): decode (datagram
  // read -> frame applied), queued (-> Send on the stream: the slot and,
  // when the receive thread does not send it itself, the send thread's
  // wake-up), write (Send: a full window's wait and gRPC's write), server
  // (Send returned -> the answer read by the stream's reader thread: gRPC
  // both ways and the server), hand-over (-> the answer thread has it: its
  // wake-up), out (writing the bundle and sendto). round trip: write and
  // server together, as the stream measures it.
  absl::Duration p99_decode, p99_queued, p99_write, p99_server, p99_handover,
      p99_out, p99_round_trip;
};

class VmcBridge {
 public:
  // Sets up the profile and the stream and starts the threads. Errors name
  // the file, the flag or the RPC. `client` must outlive the bridge.
  static absl::StatusOr<std::unique_ptr<VmcBridge>> Start(
      ReachClient& client, const VmcBridgeOptions& options);
  ~VmcBridge();  // Stop().

  // Stops receiving, lets the frames sent be answered and sent on, closes
  // the stream; returns its status.
  absl::Status Stop();
  // Blocks up to `timeout` for the bridge to end on its own (the stream
  // broke); true if it did (Stop() says why).
  bool Wait(absl::Duration timeout);

  int port() const { return port_; }
  // The retarget profile (empty in tracker mode).
  const v1::RetargetProfile& profile() const { return profile_; }
  // The target's registered id and name.
  const std::string& target_id() const { return target_id_; }
  const std::string& target_name() const { return target_.name(); }
  // Tracker mode: (body part, target joint) of every part a tracker can
  // drive.
  std::vector<std::pair<std::string, std::string>> goal_joints() const;
  // The HumanBodyBones sent, with their target joints' names.
  std::vector<std::pair<std::string, std::string>> bones() const;
  VmcBridgeCounts counts() const;
  // The counts in Prometheus' text format (reach_vmc_packets_total{result},
  // reach_vmc_messages_total{kind}, reach_vmc_frames_total{result},
  // reach_vmc_frames_lost_total, reach_vmc_latency_seconds{quantile}).
  std::string PrometheusText() const;
  // The first in-band error answered (empty: none).
  std::string first_error() const;

 private:
  VmcBridge() = default;
  void ReceiveLoop();
  void SendLoop();
  // Sends the slot's frame, if any, on the stream (the receive thread when
  // the window has room, else the send thread); false when the stream is
  // broken.
  bool SendSlot() ABSL_EXCLUSIVE_LOCKS_REQUIRED(send_mu_);
  void AnswerLoop();
  void Fail(const absl::Status& status);

  // Tracker mode: one frame's tracked parts (tracking space).
  struct TrackerFrame {
    std::array<bool, vmc::kBodyParts> has{};
    std::array<Transform, vmc::kBodyParts> pose;
    bool has_time = false;
    double time = 0;
  };
  // Fills `request`'s goals (and on the first frame its start pose) from
  // `frame`.
  void TrackerGoals(const TrackerFrame& frame, bool first,
                    v1::SolveRequest* request) const;

  struct Pending {
    uint64_t sequence = 0;
    double time = 0;  // The sender's (or arrival's) time, seconds.
    absl::Time arrived;
    absl::Time decoded;
    absl::Time sent;                            // Just before Send.
    absl::Time written = absl::InfinitePast();  // Send returned.
  };
  // One frame out's stages (VmcBridgeCounts::p99_queued, ...).
  struct Stages {
    absl::Duration total, decode, queued, write, server, handover, out,
        round_trip;
  };

  ReachClient* client_ = nullptr;
  VmcBridgeOptions options_;
  v1::RetargetProfile profile_;
  v1::Skeleton target_;
  std::vector<std::string> target_names_;
  std::unique_ptr<vmc::VmcReceiver> receiver_;
  std::unique_ptr<vmc::VmcPoseWriter> writer_;
  std::unique_ptr<RetargetStream> stream_;
  std::string target_id_;
  // Tracker mode.
  std::unique_ptr<SolveStream> solve_stream_;
  std::unique_ptr<vmc::TrackerMap> tracker_map_;
  std::array<int, vmc::kBodyParts> part_joint_{};  // -1: none.
  // Tracking space -> model space: a turn about +Y taking +Z (Unity's
  // forward) to the rig's forward.
  Eigen::Quaterniond facing_ = Eigen::Quaterniond::Identity();
  std::vector<Transform> reference_globals_;
  std::vector<Eigen::Quaterniond> reference_rotations_;  // Local.
  Eigen::Vector3d reference_root_translation_ = Eigen::Vector3d::Zero();
  int fd_ = -1;
  int port_ = 0;
  std::vector<uint8_t> send_address_;  // sockaddr_in.
  absl::Time started_;
  std::thread receive_thread_, send_thread_, answer_thread_;
  std::atomic<bool> stopping_{false};

  // Held while a frame is made and sent: one sender at a time, in order.
  absl::Mutex send_mu_;
  v1::RetargetRequest request_ ABSL_GUARDED_BY(send_mu_);
  v1::SolveRequest solve_ ABSL_GUARDED_BY(send_mu_);
  vmc::SourceFrame send_frame_ ABSL_GUARDED_BY(send_mu_);
  TrackerFrame send_tracked_ ABSL_GUARDED_BY(send_mu_);
  uint64_t sequence_ ABSL_GUARDED_BY(send_mu_) = 0;
  bool has_previous_ ABSL_GUARDED_BY(send_mu_) = false;
  double previous_time_ ABSL_GUARDED_BY(send_mu_) = 0;

  mutable absl::Mutex mu_;
  // The slot: the newest frame not yet sent.
  vmc::SourceFrame slot_ ABSL_GUARDED_BY(mu_);
  TrackerFrame tracker_slot_ ABSL_GUARDED_BY(mu_);
  absl::Time slot_arrived_ ABSL_GUARDED_BY(mu_);
  absl::Time slot_decoded_ ABSL_GUARDED_BY(mu_);
  bool slot_full_ ABSL_GUARDED_BY(mu_) = false;
  bool sending_done_ ABSL_GUARDED_BY(mu_) = false;
  // The receive thread is sending the slot's frame itself.
  bool inline_sending_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;  // The answer thread is done.
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::string first_error_ ABSL_GUARDED_BY(mu_);
  VmcBridgeCounts counts_ ABSL_GUARDED_BY(mu_);
  std::vector<Stages> latencies_ ABSL_GUARDED_BY(mu_);  // A ring.
  size_t latency_next_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopped_ = false;
};

}  // namespace reach::client

#endif  // REACH_CLIENT_VMC_BRIDGE_H_
