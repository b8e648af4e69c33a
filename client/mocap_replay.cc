#include "client/mocap_replay.h"

#include <algorithm>
#include <deque>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "wire/convert.h"

namespace reach::client {
namespace {

std::vector<std::string> ChainNames(const Skeleton& skeleton) {
  std::vector<std::string> names;
  for (int c = 0; c < skeleton.num_chains(); ++c) {
    names.push_back(skeleton.chain(c).name);
  }
  return names;
}

double RestLength(const Skeleton& skeleton, const std::vector<int>& path) {
  double length = 0;
  for (size_t i = 1; i < path.size(); ++i) {
    const Transform& rest = skeleton.joint(path[i]).rest;
    length += rest.scale * rest.translation.norm();
  }
  return length;
}

}  // namespace

double PoseHeight(const Skeleton& skeleton, const Pose& pose) {
  std::vector<Transform> globals(skeleton.num_joints());
  ComputeGlobals(skeleton, pose, absl::MakeSpan(globals));
  double lo = globals.empty() ? 0 : globals[0].translation.y();
  double hi = lo;
  for (const Transform& g : globals) {
    lo = std::min(lo, g.translation.y());
    hi = std::max(hi, g.translation.y());
  }
  return hi - lo;
}

MocapRetarget::MocapRetarget(const import::BvhClip& clip, Skeleton source,
                             const Skeleton& target)
    : clip_(&clip), source_(std::move(source)), target_(&target) {}

absl::StatusOr<MocapRetarget> MocapRetarget::Create(
    const import::BvhClip& clip, const Skeleton& target,
    std::vector<std::string> chains) {
  absl::StatusOr<Skeleton> source = Skeleton::Create(clip.skeleton.def);
  if (!source.ok()) return source.status();
  MocapRetarget r(clip, *std::move(source), target);
  if (chains.empty()) {
    for (const std::string& name : ChainNames(r.source_)) {
      if (target.FindChain(name) >= 0) chains.push_back(name);
    }
    if (chains.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the clip and the skeleton share no chain: the clip has [",
          absl::StrJoin(ChainNames(r.source_), ", "), "], the skeleton [",
          absl::StrJoin(ChainNames(target), ", "),
          "]; to put the clip on another rig, use `reach retarget`"));
    }
  }
  double leg_scale = 0;
  int legs = 0;
  for (const std::string& name : chains) {
    const int source_chain = r.source_.FindChain(name);
    const int target_chain = target.FindChain(name);
    if (source_chain < 0 || target_chain < 0) {
      return absl::NotFoundError(absl::StrCat(
          "chain '", name, "' is not in the ",
          source_chain < 0 ? "clip's skeleton" : "target skeleton",
          " (chains: ",
          absl::StrJoin(ChainNames(source_chain < 0 ? r.source_ : target), ", "),
          ")"));
    }
    Limb limb;
    limb.source_path = r.source_.chain(source_chain).joints;
    limb.target_path = target.chain(target_chain).joints;
    const double source_length = RestLength(r.source_, limb.source_path);
    if (source_length <= 1e-12) {
      return absl::InvalidArgumentError(
          absl::StrCat("chain '", name, "' has zero length in the clip"));
    }
    limb.scale = RestLength(target, limb.target_path) / source_length;
    if (absl::StrContains(name, "leg")) {
      leg_scale += limb.scale;
      ++legs;
    }
    r.target_tips_.push_back(limb.target_path.back());
    r.limbs_.push_back(std::move(limb));
  }
  r.chain_names_ = std::move(chains);
  if (legs > 0) r.root_scale_ = leg_scale / legs;

  r.source_of_target_.assign(target.num_joints(), -1);
  r.warm_started_.assign(target.num_joints(), false);
  // Rotations are copied by joint name: a rig with other names would keep
  // those joints frozen at rest, silently. That is retargeting, which the
  // server does.
  std::vector<std::string> unnamed;
  for (int j = 0; j < target.num_joints(); ++j) {
    r.source_of_target_[j] = r.source_.FindJoint(target.joint(j).name);
    if (r.source_of_target_[j] < 0) unnamed.push_back(target.joint(j).name);
  }
  if (!unnamed.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the skeleton has ", unnamed.size(), " joint(s) the clip does not (",
        absl::StrJoin(unnamed.begin(),
                      unnamed.begin() + std::min<size_t>(unnamed.size(), 5),
                      ", "),
        unnamed.size() > 5 ? ", ..." : "",
        "): `reach stream` drives the clip's own joints; to put the clip "
        "on another rig, use `reach retarget`"));
  }
  for (const Limb& limb : r.limbs_) {
    for (size_t i = 0; i + 1 < limb.target_path.size(); ++i) {
      r.warm_started_[limb.target_path[i]] = true;
    }
  }
  r.source_globals_.resize(r.source_.num_joints());
  r.target_globals_.resize(target.num_joints());
  return r;
}

void MocapRetarget::BuildFrame(int frame, v1::SolveRequest* request,
                               Pose* start,
                               std::vector<Eigen::Vector3d>* targets) {
  const Skeleton& target = *target_;
  // Consecutive frames (the replay's case) read each clip frame once.
  if (frame == frame_index_ + 1) {
    std::swap(previous_, frame_);
  } else if (frame > 0) {
    clip_->FramePose(frame - 1, &previous_);
  }
  clip_->FramePose(frame, &frame_);
  frame_index_ = frame;
  start->local.resize(target.num_joints());
  for (int j = 0; j < target.num_joints(); ++j) {
    Transform& local = start->local[j];
    local = target.joint(j).rest;
    const int s = source_of_target_[j];
    if (s < 0) continue;
    if (!warm_started_[j]) {
      local.rotation = frame_.local[s].rotation;
    } else if (frame > 0) {
      local.rotation = previous_.local[s].rotation;
    }
  }
  start->local[0].translation = root_scale_ * frame_.local[0].translation;
  ComputeGlobals(source_, frame_, absl::MakeSpan(source_globals_));
  ComputeGlobals(target, *start, absl::MakeSpan(target_globals_));

  request->clear_goals();
  targets->clear();
  for (size_t c = 0; c < limbs_.size(); ++c) {
    const Limb& limb = limbs_[c];
    const auto& sp = limb.source_path;
    const Eigen::Vector3d source_root = source_globals_[sp.front()].translation;
    const Eigen::Vector3d target_root =
        target_globals_[limb.target_path.front()].translation;
    const auto mapped = [&](int source_joint) -> Eigen::Vector3d {
      return target_root +
             limb.scale * (source_globals_[source_joint].translation -
                           source_root);
    };
    v1::Goal* goal = request->add_goals();
    goal->set_chain(chain_names_[c]);
    goal->set_solver(solver);
    const Eigen::Vector3d tip = mapped(sp.back());
    ToProto(tip, goal->mutable_target());
    ToProto(mapped(sp[(sp.size() - 1) / 2]), goal->mutable_pole());
    targets->push_back(tip);
  }
  ToProto(*start, request->mutable_start_pose());
}

absl::StatusOr<ReplayReport> ReplayMocap(ReachClient& client,
                                         const std::string& skeleton_id,
                                         MocapRetarget& retarget,
                                         const ReplayOptions& options) {
  const import::BvhClip& clip = retarget.clip();
  const Skeleton& target = retarget.target();
  const int first = std::clamp(options.first_frame, 0, clip.num_frames);
  const int total = options.max_frames < 0
                        ? clip.num_frames - first
                        : std::min(options.max_frames, clip.num_frames - first);

  ReplayReport report;
  {
    Pose pose;
    clip.FramePose(first < clip.num_frames ? first : 0, &pose);
    if (clip.num_frames > 0) {
      report.source_height = PoseHeight(retarget.source(), pose);
    }
    v1::SolveRequest scratch;
    Pose start;
    std::vector<Eigen::Vector3d> targets;
    if (clip.num_frames > 0) {
      retarget.BuildFrame(first, &scratch, &start, &targets);
      report.target_height = PoseHeight(target, start);
    }
  }
  if (options.keep_poses) report.poses.reserve(total);

  struct Pending {
    int frame;
    Pose start;
    std::vector<Eigen::Vector3d> targets;
  };
  std::deque<Pending> pending;
  std::vector<absl::Duration> latencies;
  latencies.reserve(total);
  std::vector<Transform> globals(target.num_joints());
  double error_sum = 0;
  double server_error_sum = 0;
  double start_error_sum = 0;
  int start_goals = 0;
  Pose solved;
  Pose last = RestPose(target);

  const auto handle = [&](const StreamResult& result) {
    Pending p = std::move(pending.front());
    pending.pop_front();
    latencies.push_back(result.latency);
    const v1::SolveResponse& response = result.response;
    if (response.sequence() != static_cast<uint64_t>(p.frame)) {
      ++report.errors;
      if (report.first_error.empty()) {
        report.first_error = absl::StrCat("frame ", p.frame,
                                          ": answered with sequence ",
                                          response.sequence());
      }
    } else if (response.has_error()) {
      ++report.errors;
      if (report.first_error.empty()) {
        report.first_error = absl::StrCat("frame ", p.frame, ": ",
                                          response.error().message());
      }
    } else if (response.skipped()) {
      ++report.skipped;
    } else {
      solved = p.start;
      if (absl::Status s = ApplyResponse(response, &solved); !s.ok()) {
        ++report.errors;
        if (report.first_error.empty()) {
          report.first_error = absl::StrCat("frame ", p.frame, ": ",
                                            s.message());
        }
      } else {
        ++report.solved;
        ComputeGlobals(target, solved, absl::MakeSpan(globals));
        const std::vector<int>& tips = retarget.target_tips();
        for (size_t g = 0; g < tips.size(); ++g) {
          const double e = (globals[tips[g]].translation - p.targets[g]).norm();
          error_sum += e;
          report.max_error = std::max(report.max_error, e);
          ++report.goals;
          if (static_cast<int>(g) < response.results_size()) {
            server_error_sum += response.results(g).position_error();
          }
        }
        last = solved;
      }
    }
    if (options.keep_poses) report.poses.push_back(last);
  };

  const absl::Duration deadline =
      options.timeout +
      (options.fps > 0 ? absl::Seconds(total / options.fps) : absl::ZeroDuration()) +
      absl::Milliseconds(5) * total;
  std::unique_ptr<SolveStream> stream =
      client.OpenStream(deadline, options.max_in_flight);
  const absl::Time begin = absl::Now();
  StreamResult result;
  v1::SolveRequest request;
  request.set_skeleton_id(skeleton_id);
  request.set_latest_wins(options.latest_wins);
  for (int i = 0; i < total; ++i) {
    const int frame = first + i;
    Pending p;
    p.frame = frame;
    retarget.BuildFrame(frame, &request, &p.start, &p.targets);
    request.set_sequence(frame);
    ComputeGlobals(target, p.start, absl::MakeSpan(globals));
    for (size_t g = 0; g < p.targets.size(); ++g) {
      start_error_sum +=
          (globals[retarget.target_tips()[g]].translation - p.targets[g])
              .norm();
      ++start_goals;
    }
    if (options.fps > 0) {
      const absl::Time due = begin + absl::Seconds(i / options.fps);
      const absl::Time now = absl::Now();
      if (due > now) absl::SleepFor(due - now);
    }
    pending.push_back(std::move(p));
    if (!stream->Send(request)) {
      pending.pop_back();
      break;
    }
    ++report.frames;
    while (stream->TryReceive(&result)) handle(result);
    if (options.progress && (i % 50 == 49 || i + 1 == total)) {
      options.progress(i + 1, total);
    }
  }
  while (stream->Receive(&result)) handle(result);
  const absl::Status status = stream->Finish();
  while (stream->TryReceive(&result)) handle(result);
  if (!status.ok()) return status;
  report.resumes = stream->resumes();

  report.seconds = absl::ToDoubleSeconds(absl::Now() - begin);
  const int answered = report.solved + report.skipped + report.errors;
  report.fps = report.seconds > 0 ? answered / report.seconds : 0;
  if (report.goals > 0) {
    report.mean_error = error_sum / report.goals;
    report.mean_server_error = server_error_sum / report.goals;
  }
  if (start_goals > 0) report.mean_start_error = start_error_sum / start_goals;
  std::sort(latencies.begin(), latencies.end());
  report.p50 = Percentile(latencies, 0.50);
  report.p99 = Percentile(latencies, 0.99);
  if (!latencies.empty()) report.max_latency = latencies.back();
  return report;
}

}  // namespace reach::client
