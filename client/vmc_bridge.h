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
//   max_in_flight unanswered, latest_wins set;
// - answer: each answer, in order, written as one VMC bundle
//   (vmc::VmcPoseWriter) with the frame's sender time and sent to the
//   receiver.
// Bad input never stops it: every datagram is counted by what became of it
// (counts(), PrometheusText()). A broken stream (the server gone, the
// profile deleted) ends the bridge with its status (Wait).
#ifndef REACH_CLIENT_VMC_BRIDGE_H_
#define REACH_CLIENT_VMC_BRIDGE_H_

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
  // UDP in -> UDP out inside the bridge, over the last 4096 frames out.
  absl::Duration p50, p99, max;
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
  const v1::RetargetProfile& profile() const { return profile_; }
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
  void AnswerLoop();
  void Fail(const absl::Status& status);

  struct Pending {
    uint64_t sequence = 0;
    double time = 0;  // The sender's (or arrival's) time, seconds.
    absl::Time arrived;
  };

  ReachClient* client_ = nullptr;
  VmcBridgeOptions options_;
  v1::RetargetProfile profile_;
  v1::Skeleton target_;
  std::vector<std::string> target_names_;
  std::unique_ptr<vmc::VmcReceiver> receiver_;
  std::unique_ptr<vmc::VmcPoseWriter> writer_;
  std::unique_ptr<RetargetStream> stream_;
  int fd_ = -1;
  int port_ = 0;
  std::vector<uint8_t> send_address_;  // sockaddr_in.
  absl::Time started_;
  std::thread receive_thread_, send_thread_, answer_thread_;
  std::atomic<bool> stopping_{false};

  mutable absl::Mutex mu_;
  // The slot: the newest frame not yet sent.
  vmc::SourceFrame slot_ ABSL_GUARDED_BY(mu_);
  absl::Time slot_arrived_ ABSL_GUARDED_BY(mu_);
  bool slot_full_ ABSL_GUARDED_BY(mu_) = false;
  bool sending_done_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;  // The answer thread is done.
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::string first_error_ ABSL_GUARDED_BY(mu_);
  VmcBridgeCounts counts_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Duration> latencies_ ABSL_GUARDED_BY(mu_);  // A ring.
  size_t latency_next_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopped_ = false;
};

}  // namespace reach::client

#endif  // REACH_CLIENT_VMC_BRIDGE_H_
