#include "client/vmc_bridge.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "importers/import_error.h"
#include "importers/skeleton_file.h"
#include "solvers/characterize.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"
#include "wire/convert.h"

namespace reach::client {
namespace {

constexpr size_t kMaxDatagram = 65536;
constexpr size_t kLatencyRing = 4096;

absl::StatusOr<sockaddr_in> ParseAddress(const std::string& text,
                                         absl::string_view flag) {
  const size_t colon = text.rfind(':');
  int port = -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(text.substr(colon + 1), &port) || port < 0 ||
      port > 65535 ||
      inet_pton(AF_INET, text.substr(0, colon).c_str(), &address.sin_addr) !=
          1) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", text, ": expected IPV4:PORT (127.0.0.1:39539)"));
  }
  address.sin_port = htons(static_cast<uint16_t>(port));
  return address;
}

}  // namespace

absl::StatusOr<std::unique_ptr<VmcBridge>> VmcBridge::Start(
    ReachClient& client, const VmcBridgeOptions& options) {
  std::unique_ptr<VmcBridge> bridge(new VmcBridge());
  bridge->client_ = &client;
  bridge->options_ = options;
  absl::StatusOr<sockaddr_in> listen = ParseAddress(options.listen, "--listen");
  if (!listen.ok()) return listen.status();
  absl::StatusOr<sockaddr_in> send_to = ParseAddress(options.send_to, "--send");
  if (!send_to.ok()) return send_to.status();
  if (options.target.empty()) {
    return absl::InvalidArgumentError("--to: a target rig is needed");
  }

  std::vector<std::string> names;
  std::vector<Transform> rest;
  v1::RetargetProfileSpec spec = options.spec;
  if (!options.trackers) {
    // The source: the built-in humanoid or a file, imported by the server.
    v1::ImportSkeletonRequest source_request;
    if (options.source.empty()) {
      source_request.set_data(kVmcHumanoidJson);
      source_request.set_file_name("vmc_humanoid.skeleton.json");
    } else {
      if (absl::Status s =
              import::ReadFile(options.source, source_request.mutable_data());
          !s.ok()) {
        return s;
      }
      const size_t slash = options.source.rfind('/');
      source_request.set_file_name(slash == std::string::npos
                                       ? options.source
                                       : options.source.substr(slash + 1));
    }
    absl::StatusOr<v1::ImportSkeletonResponse> source =
        client.ImportSkeleton(source_request);
    if (!source.ok()) return source.status();
    SkeletonDef source_def;
    if (absl::Status s = FromProto(source->skeleton(), &source_def); !s.ok()) {
      return s;
    }
    if (source_def.joints.empty() || source_def.joints[0].parent != -1) {
      return absl::InvalidArgumentError(
          "--source: the skeleton's first joint must be its root (Hips)");
    }
    for (const JointDef& joint : source_def.joints) {
      names.push_back(joint.name);
      rest.push_back(joint.rest);
    }
    spec.mutable_source()->set_skeleton_id(source->skeleton_id());
  }

  // The target: a file imported by the server, or a registered id.
  v1::Pose target_reference;
  bool has_target_reference = false;
  if (import::FormatOfFileName(options.target) !=
      import::SkeletonFormat::kUnknown) {
    absl::StatusOr<v1::ImportSkeletonResponse> target =
        client.ImportFile(options.target, options.target_reference_frame >= 0);
    if (!target.ok()) return target.status();
    spec.mutable_target()->set_skeleton_id(target->skeleton_id());
    bridge->target_ = target->skeleton();
    if (options.target_reference_frame >= 0) {
      if (options.target_reference_frame >= target->motion_size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--target-frame ", options.target_reference_frame, ": ",
            options.target, " has ", target->motion_size(), " frames"));
      }
      target_reference = target->motion(options.target_reference_frame);
      has_target_reference = true;
      *spec.mutable_target()->mutable_reference() = target_reference;
    }
  } else {
    absl::StatusOr<v1::GetSkeletonResponse> target =
        client.GetSkeleton(options.target);
    if (!target.ok()) return target.status();
    spec.mutable_target()->set_skeleton_id(target->skeleton_id());
    bridge->target_ = target->skeleton();
  }
  bridge->target_id_ = spec.target().skeleton_id();
  if (!options.trackers) {
    absl::StatusOr<v1::CreateRetargetProfileResponse> profile =
        client.CreateRetargetProfile(spec);
    if (!profile.ok()) return profile.status();
    bridge->profile_ = profile->profile();
    has_target_reference = bridge->profile_.has_target_reference();
    if (has_target_reference) {
      target_reference = bridge->profile_.target_reference();
    }
  }

  // The target's bones: roles -> HumanBodyBones, the retarget pose's
  // model-space transforms.
  SkeletonDef target_def;
  if (absl::Status s = FromProto(bridge->target_, &target_def); !s.ok()) {
    return s;
  }
  std::vector<int> parents;
  absl::flat_hash_map<std::string, int> index;
  for (const JointDef& joint : target_def.joints) {
    index.emplace(joint.name, static_cast<int>(parents.size()));
    parents.push_back(joint.parent);
    bridge->target_names_.push_back(joint.name);
  }
  absl::StatusOr<Skeleton> target_skeleton =
      Skeleton::Create(std::move(target_def));
  if (!target_skeleton.ok()) return target_skeleton.status();
  Pose reference = RestPose(*target_skeleton);
  if (has_target_reference) {
    if (absl::Status s = FromProto(*target_skeleton, target_reference,
                                   &reference, "target_reference");
        !s.ok()) {
      return s;
    }
  }
  std::vector<Transform> reference_globals(parents.size());
  ComputeGlobals(*target_skeleton, reference,
                 absl::MakeSpan(reference_globals));
  std::vector<std::pair<std::string, int>> roles;
  if (!options.trackers) {
    for (const v1::RoleMapping& role : bridge->profile_.target().roles()) {
      const auto it = index.find(role.joint());
      if (it != index.end()) roles.emplace_back(role.role(), it->second);
    }
  } else {
    // No profile: the roles from the characterisation the server would
    // make of the same skeleton and pose (solvers/characterize.h).
    absl::StatusOr<Characterization> found = Characterize(
        *target_skeleton, {}, has_target_reference ? &reference : nullptr);
    if (!found.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          options.target,
          ": tracker mode needs a humanoid: ", found.status().message()));
    }
    for (const RoleAssignment& role : found->roles) {
      roles.emplace_back(role.role, role.joint);
    }
    if (found->up.y() < 0.9) {
      return absl::InvalidArgumentError(absl::StrCat(
          options.target,
          ": tracker mode needs a rig standing along +Y (VMC's up); this "
          "one's up is (",
          found->up.x(), ", ", found->up.y(), ", ", found->up.z(), ")"));
    }
    // Turn the tracking space's forward (+Z) to the rig's.
    const Eigen::Vector3d forward(found->forward.x(), 0, found->forward.z());
    if (forward.norm() > 1e-6) {
      bridge->facing_ = Eigen::Quaterniond::FromTwoVectors(
          Eigen::Vector3d::UnitZ(), forward.normalized());
    }
    using vmc::BodyPart;
    const auto set = [&](BodyPart part, int joint) {
      bridge->part_joint_[static_cast<size_t>(part)] = joint;
    };
    bridge->part_joint_.fill(-1);
    set(BodyPart::kHead, found->head);
    set(BodyPart::kLeftHand, found->arms[kLeft].hand);
    set(BodyPart::kRightHand, found->arms[kRight].hand);
    set(BodyPart::kPelvis, found->pelvis);
    set(BodyPart::kLeftFoot, found->legs[kLeft].foot);
    set(BodyPart::kRightFoot, found->legs[kRight].foot);
    bridge->reference_globals_ = reference_globals;
    for (const Transform& t : reference.local) {
      bridge->reference_rotations_.push_back(t.rotation);
    }
    bridge->reference_root_translation_ = reference.local[0].translation;
    bridge->tracker_map_ = std::make_unique<vmc::TrackerMap>(
        options.assignment, options.tracker_offsets);
  }
  absl::StatusOr<vmc::VmcPoseWriter> writer = vmc::VmcPoseWriter::Create(
      std::move(parents), roles, std::move(reference_globals), options.bones,
      options.scale);
  if (!writer.ok()) return writer.status();
  bridge->writer_ = std::make_unique<vmc::VmcPoseWriter>(*std::move(writer));
  bridge->receiver_ = std::make_unique<vmc::VmcReceiver>(
      std::move(names), std::move(rest), options.limits, options.trackers);

  // The socket: bound where we listen; answers leave from it too.
  bridge->fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (bridge->fd_ < 0) {
    return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  }
  const int buffer = 4 << 20;
  setsockopt(bridge->fd_, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
  if (bind(bridge->fd_, reinterpret_cast<const sockaddr*>(&*listen),
           sizeof *listen) != 0) {
    const int error = errno;
    close(bridge->fd_);
    bridge->fd_ = -1;
    return absl::UnavailableError(
        absl::StrCat("--listen ", options.listen, ": ", strerror(error)));
  }
  sockaddr_in bound{};
  socklen_t length = sizeof bound;
  getsockname(bridge->fd_, reinterpret_cast<sockaddr*>(&bound), &length);
  bridge->port_ = ntohs(bound.sin_port);
  bridge->send_address_.resize(sizeof(sockaddr_in));
  std::memcpy(bridge->send_address_.data(), &*send_to, sizeof(sockaddr_in));

  const ResumeOptions resume{options.reconnect_within > absl::ZeroDuration(),
                             options.reconnect_within};
  if (options.trackers) {
    bridge->solve_stream_ = client.OpenStream(
        options.max_duration, std::max(1, options.max_in_flight), resume);
  } else {
    bridge->stream_ = client.OpenRetargetStream(
        options.max_duration, std::max(1, options.max_in_flight), resume);
  }
  bridge->request_.set_profile_id(bridge->profile_.profile_id());
  bridge->request_.set_latest_wins(true);
  bridge->request_.set_return_globals(true);
  bridge->solve_.set_skeleton_id(bridge->target_id_);
  bridge->solve_.set_latest_wins(true);
  bridge->solve_.set_return_globals(true);
  *bridge->solve_.mutable_full_body() = options.full_body;
  bridge->solve_.mutable_full_body()->set_plant_feet(true);
  bridge->started_ = absl::Now();
  bridge->latencies_.reserve(kLatencyRing);
  VmcBridge* b = bridge.get();
  b->receive_thread_ = std::thread([b] { b->ReceiveLoop(); });
  b->send_thread_ = std::thread([b] { b->SendLoop(); });
  b->answer_thread_ = std::thread([b] { b->AnswerLoop(); });
  return bridge;
}

VmcBridge::~VmcBridge() { Stop().IgnoreError(); }

void VmcBridge::Fail(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (!failed_) {
    failed_ = true;
    status_ = status;
  }
}

void VmcBridge::ReceiveLoop() {
  std::vector<uint8_t> buffer(kMaxDatagram);
  while (!stopping_.load(std::memory_order_relaxed)) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    const ssize_t n =
        recv(fd_, buffer.data(), buffer.size(), MSG_TRUNC | MSG_DONTWAIT);
    if (n < 0) continue;
    const absl::Time arrived = absl::Now();
    if (static_cast<size_t>(n) > buffer.size()) {
      absl::MutexLock lock(&mu_);
      ++counts_.packets_truncated;
      continue;
    }
    const vmc::VmcReceiver::Outcome outcome =
        receiver_->Apply(buffer.data(), static_cast<size_t>(n));
    const absl::Time decoded = absl::Now();
    const bool placed = outcome == vmc::VmcReceiver::Outcome::kFrame &&
                        tracker_map_ != nullptr &&
                        tracker_map_->Apply(receiver_->trackers()) > 0;
    // With room in the window and no send under way, this thread sends the
    // frame itself: no wake-up of the send thread on the way (under load,
    // each thread hop is a wait for a core).
    const int in_flight = solve_stream_ != nullptr ? solve_stream_->in_flight()
                                                   : stream_->in_flight();
    const bool inline_send = options_.send_from_receive_thread &&
                             outcome == vmc::VmcReceiver::Outcome::kFrame &&
                             in_flight < std::max(1, options_.max_in_flight) &&
                             send_mu_.TryLock();
    absl::Cleanup send_inline = [this, inline_send] {
      if (!inline_send) return;
      SendSlot();
      send_mu_.Unlock();
      absl::MutexLock lock(&mu_);
      inline_sending_ = false;
    };
    absl::MutexLock lock(&mu_);
    inline_sending_ = inline_send;
    counts_.receive = receiver_->counts();
    if (outcome != vmc::VmcReceiver::Outcome::kFrame) continue;
    const vmc::SourceFrame& frame = receiver_->frame();
    if (tracker_map_ != nullptr) {
      counts_.trackers_applied = tracker_map_->applied();
      counts_.trackers_unknown_serial = tracker_map_->unknown_serial();
      if (!placed) {
        ++counts_.frames_no_goal;
        continue;
      }
      if (slot_full_) ++counts_.frames_superseded;
      for (int p = 0; p < vmc::kBodyParts; ++p) {
        const auto part = static_cast<vmc::BodyPart>(p);
        tracker_slot_.has[static_cast<size_t>(p)] = tracker_map_->has(part);
        tracker_slot_.pose[static_cast<size_t>(p)] = tracker_map_->pose(part);
      }
      tracker_slot_.has_time = frame.has_time;
      tracker_slot_.time = frame.time;
      slot_arrived_ = arrived;
      slot_decoded_ = decoded;
      slot_full_ = true;
      continue;
    }
    if (slot_full_) ++counts_.frames_superseded;
    slot_.rotations.assign(frame.rotations.begin(), frame.rotations.end());
    slot_.root_translation = frame.root_translation;
    slot_.has_time = frame.has_time;
    slot_.time = frame.time;
    slot_arrived_ = arrived;
    slot_decoded_ = decoded;
    slot_full_ = true;
  }
}

void VmcBridge::SendLoop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      // A frame the receive thread is sending itself is not this thread's.
      const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return (slot_full_ && !inline_sending_) || stopping_.load() ||
               failed_ || sending_done_;
      };
      mu_.Await(absl::Condition(&ready));
      if (sending_done_) return;
      if ((!slot_full_ && !inline_sending_) || failed_) {
        sending_done_ = true;
        return;
      }
    }
    absl::MutexLock send_lock(&send_mu_);
    SendSlot();
  }
}

bool VmcBridge::SendSlot() {
  vmc::SourceFrame& frame = send_frame_;
  TrackerFrame& tracked = send_tracked_;
  absl::Time arrived, decoded;
  {
    absl::MutexLock lock(&mu_);
    if (!slot_full_ || sending_done_) return !sending_done_;
    if (solve_stream_ != nullptr) {
      tracked = tracker_slot_;
      frame.has_time = tracked.has_time;
      frame.time = tracked.time;
    } else {
      std::swap(frame, slot_);
    }
    arrived = slot_arrived_;
    decoded = slot_decoded_;
    slot_full_ = false;
  }
  // The sender's clock when it sends one, else arrival's.
  const double time =
      frame.has_time ? frame.time : absl::ToDoubleSeconds(arrived - started_);
  double dt = has_previous_ ? time - previous_time_ : 0;
  if (has_previous_) dt = std::clamp(dt, 1e-4, 10.0);
  has_previous_ = true;
  previous_time_ = time;
  const uint64_t sequence = ++sequence_;
  if (solve_stream_ != nullptr) {
    // A solve has no frame time: the sender's time is kept for the
    // answer only.
    solve_.set_sequence(sequence);
    TrackerGoals(tracked, sequence == 1, &solve_);
  } else {
    request_.set_sequence(sequence);
    request_.set_frame_time_s(dt);
    v1::Pose* pose = request_.mutable_source();
    pose->mutable_rotations()->Clear();
    for (const Eigen::Quaterniond& q : frame.rotations) {
      ToProto(q, pose->add_rotations());
    }
    ToProto(frame.root_translation, pose->mutable_root_translation());
  }
  {
    absl::MutexLock lock(&mu_);
    pending_.push_back({sequence, time, arrived, decoded, absl::Now()});
  }
  const bool sent = solve_stream_ != nullptr ? solve_stream_->Send(solve_)
                                             : stream_->Send(request_);
  const absl::Time written = absl::Now();
  absl::MutexLock lock(&mu_);
  // The answer may have been read already (then its write took the whole
  // round trip).
  for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
    if (it->sequence == sequence) {
      it->written = written;
      break;
    }
  }
  if (!sent) {
    // The answer thread sees the stream end and says why.
    pending_.pop_back();
    sending_done_ = true;
    return false;
  }
  ++counts_.frames_sent;
  return true;
}

void VmcBridge::TrackerGoals(const TrackerFrame& frame, bool first,
                             v1::SolveRequest* request) const {
  using vmc::BodyPart;
  constexpr size_t kHead = static_cast<size_t>(BodyPart::kHead);
  request->clear_goals();
  request->clear_start_pose();
  // Tracking space -> model space: turned to the rig's facing, metres to
  // target units; a tracker's rotation is a turn from looking along +Z,
  // conjugated the same way.
  std::array<Eigen::Vector3d, vmc::kBodyParts> at;
  std::array<Eigen::Quaterniond, vmc::kBodyParts> turn;
  for (size_t p = 0; p < at.size(); ++p) {
    at[p] = facing_ * frame.pose[p].translation / options_.scale;
    turn[p] = facing_ * frame.pose[p].rotation * facing_.conjugate();
  }
  for (size_t p = 0; p < at.size(); ++p) {
    const int joint = part_joint_[p];
    if (!frame.has[p] || joint < 0) continue;
    v1::Goal* goal = request->add_goals();
    goal->set_tip_joint(target_names_[static_cast<size_t>(joint)]);
    goal->set_solver(v1::SOLVER_FULL_BODY);
    ToProto(at[p], goal->mutable_target());
    // The HMD also turns the head: its turn from looking ahead, applied to
    // the reference pose's head. Controllers and trackers give positions
    // only: how they sit on a hand, a hip or a foot is unknown without a
    // calibration pose.
    if (p == kHead) {
      ToProto(Eigen::Quaterniond(
                  (turn[p] *
                   reference_globals_[static_cast<size_t>(joint)].rotation)
                      .normalized()),
              goal->mutable_target_orientation());
    }
  }
  if (!first) return;
  // The first frame starts from the reference pose turned to the HMD's
  // heading and moved along the floor to stand under it: the feet are
  // planted where this pose has them, so they must start under the
  // performer, not at the rig's origin.
  Eigen::Quaterniond heading = Eigen::Quaterniond::Identity();
  Eigen::Vector3d root = reference_root_translation_;
  const int head = part_joint_[kHead];
  if (frame.has[kHead] && head >= 0) {
    const Eigen::Vector3d look =
        turn[kHead] * (facing_ * Eigen::Vector3d::UnitZ());
    const Eigen::Vector3d ahead = facing_ * Eigen::Vector3d::UnitZ();
    const Eigen::Vector3d flat(look.x(), 0, look.z());
    if (flat.norm() > 1e-6) {
      heading = Eigen::Quaterniond::FromTwoVectors(ahead, flat.normalized());
    }
    const Eigen::Vector3d head_at =
        root +
        heading *
            (reference_globals_[static_cast<size_t>(head)].translation - root);
    root.x() += at[kHead].x() - head_at.x();
    root.z() += at[kHead].z() - head_at.z();
  }
  v1::Pose* start = request->mutable_start_pose();
  for (size_t j = 0; j < reference_rotations_.size(); ++j) {
    ToProto(j == 0 ? Eigen::Quaterniond(
                         (heading * reference_rotations_[0]).normalized())
                   : reference_rotations_[j],
            start->add_rotations());
  }
  ToProto(root, start->mutable_root_translation());
}

void VmcBridge::AnswerLoop() {
  StreamAnswer<v1::RetargetResponse> answer;
  StreamAnswer<v1::SolveResponse> solved;
  std::vector<Transform> globals;
  osc::Writer writer;
  const auto* to = reinterpret_cast<const sockaddr*>(send_address_.data());
  while (true) {
    Pending pending;
    {
      absl::MutexLock lock(&mu_);
      const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return counts_.frames_answered < counts_.frames_sent || sending_done_;
      };
      mu_.Await(absl::Condition(&ready));
      if (counts_.frames_answered >= counts_.frames_sent && sending_done_) {
        break;
      }
    }
    const bool received = solve_stream_ != nullptr
                              ? solve_stream_->Receive(&solved)
                              : stream_->Receive(&answer);
    const absl::Time got = absl::Now();
    if (!received) {
      // The stream ended with frames unanswered: it broke (Stop() finishes
      // it and says why).
      Fail(absl::UnavailableError(absl::StrCat(
          solve_stream_ != nullptr ? "SolveStream" : "RetargetStream",
          ": ended early")));
      break;
    }
    // The fields both answers have.
    const uint64_t sequence = solve_stream_ != nullptr
                                  ? solved.response.sequence()
                                  : answer.response.sequence();
    const v1::Error* error = nullptr;
    if (solve_stream_ != nullptr ? solved.response.has_error()
                                 : answer.response.has_error()) {
      error = solve_stream_ != nullptr ? &solved.response.error()
                                       : &answer.response.error();
    }
    const bool skipped = solve_stream_ != nullptr ? solved.response.skipped()
                                                  : answer.response.skipped();
    const auto& answer_globals = solve_stream_ != nullptr
                                     ? solved.response.globals()
                                     : answer.response.globals();
    {
      absl::MutexLock lock(&mu_);
      ++counts_.frames_answered;
      while (!pending_.empty() && pending_.front().sequence < sequence) {
        pending_.pop_front();
      }
      if (!pending_.empty()) {
        pending = pending_.front();
        pending_.pop_front();
      }
      if (error != nullptr) {
        ++counts_.frames_errors;
        if (first_error_.empty()) first_error_ = error->message();
        continue;
      }
      if (skipped) {
        ++counts_.frames_skipped;
        continue;
      }
    }
    if (answer_globals.size() != static_cast<int>(target_names_.size())) {
      absl::MutexLock lock(&mu_);
      ++counts_.frames_errors;
      if (first_error_.empty()) {
        first_error_ = "an answer without the target's globals";
      }
      continue;
    }
    globals.resize(target_names_.size());
    for (int j = 0; j < answer_globals.size(); ++j) {
      const v1::Transform& g = answer_globals.Get(j);
      globals[static_cast<size_t>(j)].translation = FromProto(g.translation());
      globals[static_cast<size_t>(j)].rotation =
          g.has_rotation() ? FromProto(g.rotation())
                           : Eigen::Quaterniond::Identity();
    }
    writer_->Write(globals, static_cast<float>(pending.time), &writer);
    const ssize_t sent =
        sendto(fd_, writer.data(), writer.size(), 0, to, sizeof(sockaddr_in));
    const absl::Time now = absl::Now();
    const absl::Duration round_trip =
        solve_stream_ != nullptr ? solved.latency : answer.latency;
    const absl::Time read_at =
        solve_stream_ != nullptr ? solved.read_at : answer.read_at;
    // Sent -> written -> read_at -> got -> now; an answer read before its
    // Send returned: the write took it all.
    const absl::Time written = std::min(
        read_at,
        pending.written == absl::InfinitePast() ? read_at : pending.written);
    Stages stages;
    stages.total = now - pending.arrived;
    stages.decode = pending.decoded - pending.arrived;
    stages.queued = pending.sent - pending.decoded;
    stages.write = written - pending.sent;
    stages.server = read_at - written;
    stages.handover = got - read_at;
    stages.out = now - got;
    stages.round_trip = round_trip;
    absl::MutexLock lock(&mu_);
    if (sent == static_cast<ssize_t>(writer.size())) ++counts_.frames_out;
    if (latencies_.size() < kLatencyRing) {
      latencies_.push_back(stages);
    } else {
      latencies_[latency_next_] = stages;
    }
    latency_next_ = (latency_next_ + 1) % kLatencyRing;
  }
  absl::MutexLock lock(&mu_);
  ended_ = true;
}

bool VmcBridge::Wait(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const auto ended = [this]()
                         ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ended_; };
  return mu_.AwaitWithTimeout(absl::Condition(&ended), timeout);
}

absl::Status VmcBridge::Stop() {
  if (stopped_) {
    absl::MutexLock lock(&mu_);
    return status_;
  }
  stopped_ = true;
  stopping_.store(true);
  {
    absl::MutexLock lock(&mu_);  // Wakes the send thread's Await.
  }
  // A Start that failed part way destroys a bridge whose threads, stream
  // or socket may not exist yet.
  if (receive_thread_.joinable()) receive_thread_.join();
  // The frames in flight are answered and sent on; a stream that is still
  // reopening after a break (the server down) is given up instead of
  // holding the stop for up to reconnect_within.
  {
    absl::MutexLock lock(&mu_);
    const auto ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return ended_;
    };
    if (answer_thread_.joinable() &&
        !mu_.AwaitWithTimeout(absl::Condition(&ended), absl::Seconds(2))) {
      if (solve_stream_ != nullptr) solve_stream_->Cancel();
      if (stream_ != nullptr) stream_->Cancel();
    }
  }
  for (std::thread* t : {&send_thread_, &answer_thread_}) {
    if (t->joinable()) t->join();
  }
  absl::Status finished;
  if (solve_stream_ != nullptr) finished = solve_stream_->Finish();
  if (stream_ != nullptr) finished = stream_->Finish();
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  absl::MutexLock lock(&mu_);
  if (!finished.ok()) status_ = finished;
  return status_;
}

std::vector<std::pair<std::string, std::string>> VmcBridge::bones() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, joint] : writer_->bones()) {
    out.emplace_back(name, target_names_[static_cast<size_t>(joint)]);
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> VmcBridge::goal_joints()
    const {
  std::vector<std::pair<std::string, std::string>> out;
  if (tracker_map_ == nullptr) return out;
  for (int p = 0; p < vmc::kBodyParts; ++p) {
    const int joint = part_joint_[static_cast<size_t>(p)];
    if (joint < 0) continue;
    out.emplace_back(
        std::string(vmc::BodyPartName(static_cast<vmc::BodyPart>(p))),
        target_names_[static_cast<size_t>(joint)]);
  }
  return out;
}

VmcBridgeCounts VmcBridge::counts() const {
  absl::MutexLock lock(&mu_);
  VmcBridgeCounts c = counts_;
  if (stream_ != nullptr) c.stream_resumes = stream_->resumes();
  if (solve_stream_ != nullptr) c.stream_resumes = solve_stream_->resumes();
  std::vector<absl::Duration> sorted;
  sorted.reserve(latencies_.size());
  for (const Stages& s : latencies_) sorted.push_back(s.total);
  std::sort(sorted.begin(), sorted.end());
  c.p50 = Percentile(sorted, 0.50);
  c.p99 = Percentile(sorted, 0.99);
  c.max = sorted.empty() ? absl::ZeroDuration() : sorted.back();
  for (const auto& [stage, p99] :
       {std::pair<absl::Duration Stages::*, absl::Duration*>{&Stages::decode,
                                                             &c.p99_decode},
        {&Stages::queued, &c.p99_queued},
        {&Stages::write, &c.p99_write},
        {&Stages::server, &c.p99_server},
        {&Stages::handover, &c.p99_handover},
        {&Stages::out, &c.p99_out},
        {&Stages::round_trip, &c.p99_round_trip}}) {
    sorted.clear();
    for (const Stages& s : latencies_) sorted.push_back(s.*stage);
    std::sort(sorted.begin(), sorted.end());
    *p99 = Percentile(sorted, 0.99);
  }
  return c;
}

std::string VmcBridge::first_error() const {
  absl::MutexLock lock(&mu_);
  return first_error_;
}

std::string VmcBridge::PrometheusText() const {
  const VmcBridgeCounts c = counts();
  const vmc::ReceiveCounts& r = c.receive;
  std::string out;
  absl::StrAppend(
      &out,
      "# HELP reach_vmc_packets_total VMC datagrams received, by what became "
      "of them.\n# TYPE reach_vmc_packets_total counter\n");
  for (const auto& [result, n] :
       {std::pair<const char*, uint64_t>{"ok", r.packets_ok},
        {"malformed", r.packets_malformed},
        {"too_large", r.packets_too_large},
        {"reordered", r.packets_reordered},
        {"truncated", c.packets_truncated}}) {
    absl::StrAppendFormat(&out, "reach_vmc_packets_total{result=\"%s\"} %d\n",
                          result, n);
  }
  absl::StrAppend(&out,
                  "# HELP reach_vmc_messages_total OSC messages of the ok "
                  "packets, by kind.\n# TYPE reach_vmc_messages_total "
                  "counter\n");
  for (const auto& [kind, n] :
       {std::pair<const char*, uint64_t>{"bone", r.bone},
        {"root", r.root},
        {"root_scaled", r.root_scaled},
        {"time", r.time},
        {"ok", r.ok},
        {"tracker", r.tracker},
        {"blend", r.blend},
        {"unknown_address", r.unknown_address},
        {"unknown_bone", r.unknown_bone},
        {"tracker_applied", c.trackers_applied},
        {"tracker_unknown_serial", c.trackers_unknown_serial},
        {"bad_arguments", r.bad_arguments}}) {
    absl::StrAppendFormat(&out, "reach_vmc_messages_total{kind=\"%s\"} %d\n",
                          kind, n);
  }
  absl::StrAppend(&out,
                  "# HELP reach_vmc_frames_total Frames (packets that set "
                  "bones), by what became of them.\n# TYPE "
                  "reach_vmc_frames_total counter\n");
  for (const auto& [result, n] :
       {std::pair<const char*, uint64_t>{"received", r.frames},
        {"no_goal", c.frames_no_goal},
        {"superseded", c.frames_superseded},
        {"sent", c.frames_sent},
        {"answered", c.frames_answered},
        {"skipped", c.frames_skipped},
        {"error", c.frames_errors},
        {"out", c.frames_out}}) {
    absl::StrAppendFormat(&out, "reach_vmc_frames_total{result=\"%s\"} %d\n",
                          result, n);
  }
  absl::StrAppendFormat(
      &out,
      "# HELP reach_vmc_frames_lost_total Frames missing between the "
      "sender's times (estimated).\n# TYPE reach_vmc_frames_lost_total "
      "counter\nreach_vmc_frames_lost_total %d\n",
      r.frames_lost);
  absl::StrAppendFormat(
      &out,
      "# HELP reach_vmc_stream_resumes_total Times the stream to the server "
      "was reopened after a break.\n# TYPE reach_vmc_stream_resumes_total "
      "counter\nreach_vmc_stream_resumes_total %d\n",
      c.stream_resumes);
  absl::StrAppendFormat(
      &out,
      "# HELP reach_vmc_latency_seconds Datagram in to VMC bundle out, last "
      "%d frames.\n# TYPE reach_vmc_latency_seconds summary\n"
      "reach_vmc_latency_seconds{quantile=\"0.5\"} %.6f\n"
      "reach_vmc_latency_seconds{quantile=\"0.99\"} %.6f\n"
      "reach_vmc_latency_seconds{quantile=\"1\"} %.6f\n",
      kLatencyRing, absl::ToDoubleSeconds(c.p50), absl::ToDoubleSeconds(c.p99),
      absl::ToDoubleSeconds(c.max));
  return out;
}

}  // namespace reach::client
