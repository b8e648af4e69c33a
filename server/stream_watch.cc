#include "server/stream_watch.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace reach {
namespace {

// A finite double with round-trip precision (JSON has no NaN or inf).
void AppendNumber(std::string* out, double v) {
  if (!std::isfinite(v)) v = 0;
  absl::StrAppendFormat(out, "%.17g", v);
}

void AppendArray(std::string* out, const double* v, size_t n) {
  out->push_back('[');
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out->push_back(',');
    AppendNumber(out, v[i]);
  }
  out->push_back(']');
}

int EffectorOf(const Skeleton& skeleton, const v1::Goal& goal) {
  if (!goal.tip_joint().empty()) return skeleton.FindJoint(goal.tip_joint());
  const int chain = skeleton.FindChain(goal.chain());
  if (chain < 0 || skeleton.chain(chain).joints.empty()) return -1;
  return skeleton.chain(chain).joints.back();
}

// Local rotations (w, x, y, z) and translations of `pose`, into reused
// vectors.
void CopyPose(const Pose& pose, std::vector<double>* rotations,
              std::vector<double>* translations) {
  const size_t n = pose.local.size();
  rotations->resize(4 * n);
  translations->resize(3 * n);
  for (size_t j = 0; j < n; ++j) {
    const Transform& t = pose.local[j];
    (*rotations)[4 * j + 0] = t.rotation.w();
    (*rotations)[4 * j + 1] = t.rotation.x();
    (*rotations)[4 * j + 2] = t.rotation.y();
    (*rotations)[4 * j + 3] = t.rotation.z();
    for (int k = 0; k < 3; ++k) (*translations)[3 * j + k] = t.translation[k];
  }
}

}  // namespace

std::string StreamFrameJson(int64_t stream, const StreamFrame& frame) {
  std::string out;
  out.reserve(160 +
              24 * (frame.rotations.size() + frame.translations.size() +
                    frame.source_rotations.size() +
                    frame.source_translations.size()) +
              160 * frame.goals.size());
  const bool retarget = !frame.profile_id.empty();
  // Skeleton and profile ids are hex digests: nothing to escape.
  absl::StrAppend(&out, "{\"stream\":", stream, ",\"version\":", frame.version,
                  ",\"kind\":\"", retarget ? "retarget" : "solve",
                  "\",\"skeletonId\":\"", frame.skeleton_id,
                  "\",\"sequence\":", frame.sequence, ",\"rotations\":");
  AppendArray(&out, frame.rotations.data(), frame.rotations.size());
  out += ",\"translations\":";
  AppendArray(&out, frame.translations.data(), frame.translations.size());
  if (retarget) {
    absl::StrAppend(&out, ",\"profileId\":\"", frame.profile_id,
                    "\",\"sourceSkeletonId\":\"", frame.source_skeleton_id,
                    "\",\"sourceRotations\":");
    AppendArray(&out, frame.source_rotations.data(),
                frame.source_rotations.size());
    out += ",\"sourceTranslations\":";
    AppendArray(&out, frame.source_translations.data(),
                frame.source_translations.size());
  }
  out += ",\"goals\":[";
  for (size_t i = 0; i < frame.goals.size(); ++i) {
    const StreamFrame::Goal& g = frame.goals[i];
    if (i > 0) out.push_back(',');
    absl::StrAppend(&out, "{\"effector\":", g.effector, ",\"target\":");
    if (g.has_target) {
      AppendArray(&out, g.target, 3);
    } else {
      out += "null";
    }
    out += ",\"pole\":";
    if (g.has_pole) {
      AppendArray(&out, g.pole, 3);
    } else {
      out += "null";
    }
    absl::StrAppend(&out, ",\"reached\":", g.reached ? "true" : "false",
                    ",\"positionError\":");
    AppendNumber(&out, g.position_error);
    out.push_back('}');
  }
  out += "]}";
  return out;
}

WatchedStream::Ids WatchedStream::ids() const {
  absl::MutexLock lock(&mu_);
  return {skeleton_id_, profile_id_, source_skeleton_id_};
}

void WatchedStream::Published(const Skeleton& skeleton,
                              const std::string& skeleton_id,
                              const v1::SolveRequest& request,
                              const Pose& pose,
                              const v1::SolveResponse& response) {
  const int64_t frames = frames_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (watchers_.load(std::memory_order_relaxed) == 0) return;
  absl::MutexLock lock(&mu_);
  StreamFrame& f = latest_;
  f.version = static_cast<uint64_t>(frames);
  f.skeleton_id = skeleton_id;
  f.sequence = request.sequence();
  CopyPose(pose, &f.rotations, &f.translations);
  f.goals.resize(request.goals_size());
  for (int i = 0; i < request.goals_size(); ++i) {
    const v1::Goal& goal = request.goals(i);
    StreamFrame::Goal& g = f.goals[i];
    g.effector = EffectorOf(skeleton, goal);
    g.has_target = goal.has_target();
    g.target[0] = goal.target().x();
    g.target[1] = goal.target().y();
    g.target[2] = goal.target().z();
    g.has_pole = goal.has_pole();
    g.pole[0] = goal.pole().x();
    g.pole[1] = goal.pole().y();
    g.pole[2] = goal.pole().z();
    const bool answered = i < response.results_size();
    g.reached = answered && response.results(i).reached();
    g.position_error = answered ? response.results(i).position_error() : 0;
  }
}

void WatchedStream::PublishedRetarget(const Skeleton& target_skeleton,
                                      uint64_t sequence, const Pose& source,
                                      const Pose& target,
                                      absl::Span<const Goal> goals,
                                      absl::Span<const GoalResult> results) {
  const int64_t frames = frames_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (watchers_.load(std::memory_order_relaxed) == 0) return;
  absl::MutexLock lock(&mu_);
  StreamFrame& f = latest_;
  f.version = static_cast<uint64_t>(frames);
  f.skeleton_id = skeleton_id_;
  f.profile_id = profile_id_;
  f.source_skeleton_id = source_skeleton_id_;
  f.sequence = sequence;
  CopyPose(target, &f.rotations, &f.translations);
  CopyPose(source, &f.source_rotations, &f.source_translations);
  f.goals.resize(goals.size());
  for (size_t i = 0; i < goals.size(); ++i) {
    const Goal& goal = goals[i];
    StreamFrame::Goal& g = f.goals[i];
    g.effector = goal.tip_joint >= 0 &&
                         goal.tip_joint < target_skeleton.num_joints()
                     ? goal.tip_joint
                     : -1;
    g.has_target = true;
    for (int k = 0; k < 3; ++k) g.target[k] = goal.target[k];
    g.has_pole = goal.pole.has_value();
    for (int k = 0; k < 3; ++k) g.pole[k] = g.has_pole ? (*goal.pole)[k] : 0;
    const bool answered = i < results.size();
    g.reached = answered && results[i].reached;
    g.position_error = answered ? results[i].position_error : 0;
  }
}

void WatchedStream::SetSkeleton(const std::string& skeleton_id) {
  absl::MutexLock lock(&mu_);
  skeleton_id_ = skeleton_id;
}

void WatchedStream::SetRetarget(const std::string& profile_id,
                                const std::string& source_skeleton_id,
                                const std::string& target_skeleton_id) {
  absl::MutexLock lock(&mu_);
  profile_id_ = profile_id;
  source_skeleton_id_ = source_skeleton_id;
  skeleton_id_ = target_skeleton_id;
}

bool WatchedStream::Latest(uint64_t after, StreamFrame* out) const {
  absl::MutexLock lock(&mu_);
  if (latest_.version <= after) return false;
  *out = latest_;
  return true;
}

std::shared_ptr<WatchedStream> StreamWatch::Add(std::string owner,
                                                bool retarget) {
  absl::MutexLock lock(&mu_);
  streams_.push_back(std::make_shared<WatchedStream>(
      next_id_++, std::move(owner), retarget));
  return streams_.back();
}

void StreamWatch::Remove(const std::shared_ptr<WatchedStream>& stream) {
  if (stream == nullptr) return;
  stream->End();
  absl::MutexLock lock(&mu_);
  streams_.erase(std::remove(streams_.begin(), streams_.end(), stream),
                 streams_.end());
}

std::vector<std::shared_ptr<WatchedStream>> StreamWatch::List() const {
  absl::MutexLock lock(&mu_);
  return streams_;
}

std::shared_ptr<WatchedStream> StreamWatch::Find(int64_t id) const {
  absl::MutexLock lock(&mu_);
  for (const auto& s : streams_) {
    if (s->id() == id) return s;
  }
  return nullptr;
}

}  // namespace reach
