#include "client/retarget_clip.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "importers/skeleton_file.h"

namespace reach::client {
namespace {

// `frames[frame]` as a side's retarget pose; errors name `flag`.
absl::Status Reference(const google::protobuf::RepeatedPtrField<v1::Pose>& frames,
                       int frame, absl::string_view flag,
                       v1::RetargetSideSpec* side) {
  if (frame < 0) return absl::OkStatus();
  if (frame >= frames.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", frame, ": ",
                     frames.empty() ? "the file has no frames (only a BVH "
                                      "clip has)"
                                    : absl::StrCat("the clip has ",
                                                   frames.size(), " frames")));
  }
  *side->mutable_reference() = frames[frame];
  return absl::OkStatus();
}

// Retargets `frames` a batch of `chunk` at a time into `answers` (with
// `quality` when report); sequences count from `first`.
absl::Status RunBatches(ReachClient& client, const std::string& id,
                        double frame_time_s,
                        const std::vector<v1::Pose>& frames, int first,
                        int chunk, bool report,
                        const std::function<void(int, int)>& progress,
                        std::vector<v1::RetargetResponse>* answers,
                        std::vector<v1::RetargetQuality>* quality) {
  constexpr int64_t kMaxRequestBytes = int64_t{8} << 20;
  const int total = static_cast<int>(frames.size());
  chunk = std::max(1, chunk);
  for (int start = 0; start < total;) {
    v1::RetargetBatchRequest request;
    request.set_profile_id(id);
    request.set_frame_time_s(frame_time_s);
    request.set_report(report);
    int end = start;
    int64_t bytes = 0;
    while (end < total && end - start < chunk &&
           (end == start ||
            bytes + static_cast<int64_t>(frames[end].ByteSizeLong()) + 8 <=
                kMaxRequestBytes)) {
      bytes += static_cast<int64_t>(frames[end].ByteSizeLong()) + 8;
      *request.add_frames() = frames[end++];
    }
    // One call per chunk; each chunk starts a new state, so its first
    // frame is planted afresh (chunks are long: rare).
    absl::StatusOr<v1::RetargetBatchResponse> answered =
        client.RetargetBatch(request);
    if (!answered.ok()) {
      return absl::Status(answered.status().code(),
                          absl::StrCat("frames ", first + start, "..",
                                       first + end - 1, ": ",
                                       answered.status().message()));
    }
    for (v1::RetargetResponse& frame : *answered->mutable_frames()) {
      frame.set_sequence(first + start + frame.sequence());
      answers->push_back(std::move(frame));
    }
    if (report) quality->push_back(answered->quality());
    if (progress) progress(end, total);
    start = end;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RetargetClipResult> RetargetClip(
    ReachClient& client, const std::string& source_file,
    const RetargetClipOptions& options) {
  RetargetClipResult result;
  absl::StatusOr<v1::ImportSkeletonResponse> source =
      client.ImportFile(source_file, /*return_motion=*/true);
  if (!source.ok()) return source.status();
  if (source->motion().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_file, ": no motion (a BVH clip is needed)"));
  }
  result.source = source->skeleton();
  result.frame_time_s = source->frame_time_s();

  v1::RetargetProfileSpec spec = options.spec;
  spec.mutable_source()->set_skeleton_id(source->skeleton_id());
  if (absl::Status s = Reference(source->motion(),
                                 options.source_reference_frame,
                                 "--source-frame", spec.mutable_source());
      !s.ok()) {
    return s;
  }
  if (import::FormatOfFileName(options.target) !=
      import::SkeletonFormat::kUnknown) {
    absl::StatusOr<v1::ImportSkeletonResponse> target = client.ImportFile(
        options.target, options.target_reference_frame >= 0);
    if (!target.ok()) return target.status();
    spec.mutable_target()->set_skeleton_id(target->skeleton_id());
    result.target = target->skeleton();
    if (absl::Status s = Reference(target->motion(),
                                   options.target_reference_frame,
                                   "--target-frame", spec.mutable_target());
        !s.ok()) {
      return s;
    }
  } else {
    if (options.target_reference_frame >= 0) {
      return absl::InvalidArgumentError(
          "--target-frame: only a BVH target file has frames");
    }
    absl::StatusOr<v1::GetSkeletonResponse> target =
        client.GetSkeleton(options.target);
    if (!target.ok()) return target.status();
    spec.mutable_target()->set_skeleton_id(target->skeleton_id());
    result.target = target->skeleton();
  }
  absl::StatusOr<v1::CreateRetargetProfileResponse> profile =
      client.CreateRetargetProfile(spec);
  if (!profile.ok()) return profile.status();
  result.profile = profile->profile();
  const std::string& id = result.profile.profile_id();

  const int clip_frames = source->motion_size();
  const int first = std::clamp(options.first_frame, 0, clip_frames);
  const int total = options.max_frames < 0
                        ? clip_frames - first
                        : std::min(options.max_frames, clip_frames - first);
  result.source_frames.assign(source->motion().begin() + first,
                              source->motion().begin() + first + total);
  result.answers.reserve(total);
  const absl::Time begin = absl::Now();

  if (!options.live) {
    const absl::Status status = RunBatches(
        client, id, result.frame_time_s, result.source_frames, first,
        options.batch_frames, options.report, options.progress,
        &result.answers, &result.quality);
    if (!status.ok()) return status;
  } else {
    const double fps = options.fps == 0 && result.frame_time_s > 0
                           ? 1.0 / result.frame_time_s
                           : options.fps;
    const absl::Duration deadline =
        options.timeout +
        (fps > 0 ? absl::Seconds(total / fps) : absl::ZeroDuration()) +
        absl::Milliseconds(5) * total;
    std::unique_ptr<RetargetStream> stream =
        client.OpenRetargetStream(deadline, options.max_in_flight);
    std::vector<absl::Duration> latencies;
    latencies.reserve(total);
    StreamAnswer<v1::RetargetResponse> answer;
    const auto take = [&](StreamAnswer<v1::RetargetResponse>& a) {
      if (a.response.has_error()) {
        if (result.errors++ == 0) {
          result.first_error = absl::StrCat(
              "frame ", a.response.sequence(), ": ",
              a.response.error().message());
        }
      } else if (a.response.skipped()) {
        ++result.skipped;
      } else {
        latencies.push_back(a.latency);
      }
      result.answers.push_back(std::move(a.response));
    };
    v1::RetargetRequest request;
    request.set_profile_id(id);
    request.set_frame_time_s(result.frame_time_s);
    request.set_latest_wins(options.latest_wins);
    for (int i = 0; i < total; ++i) {
      if (fps > 0) {
        const absl::Time due = begin + absl::Seconds(i / fps);
        const absl::Time now = absl::Now();
        if (due > now) absl::SleepFor(due - now);
      }
      request.set_sequence(first + i);
      *request.mutable_source() = result.source_frames[i];
      if (!stream->Send(request)) break;
      while (stream->TryReceive(&answer)) take(answer);
      if (options.progress && (i % 50 == 49 || i + 1 == total)) {
        options.progress(i + 1, total);
      }
    }
    while (stream->Receive(&answer)) take(answer);
    const absl::Status status = stream->Finish();
    while (stream->TryReceive(&answer)) take(answer);
    if (!status.ok()) return status;
    std::sort(latencies.begin(), latencies.end());
    result.p50 = Percentile(latencies, 0.50);
    result.p99 = Percentile(latencies, 0.99);
    if (!latencies.empty()) result.max_latency = latencies.back();
  }
  for (const v1::RetargetResponse& answer : result.answers) {
    if (!options.live && answer.iterations() == 0 &&
        answer.target().rotations_size() > 0) {
      bool any_goal = false;
      for (const v1::LimbOutcome* limb :
           {&answer.left_hand(), &answer.right_hand(), &answer.left_foot(),
            &answer.right_foot()}) {
        any_goal = any_goal || (limb->active() && !limb->reached());
      }
      if (any_goal) ++result.unsolved;
    }
  }
  result.seconds = absl::ToDoubleSeconds(absl::Now() - begin);
  result.fps = result.seconds > 0 ? result.answers.size() / result.seconds : 0;
  if (options.live && options.report &&
      static_cast<int>(result.answers.size()) == total) {
    std::vector<v1::RetargetResponse> offline;
    const absl::Status status = RunBatches(
        client, id, result.frame_time_s, result.source_frames, first,
        options.batch_frames, /*report=*/true, nullptr, &offline,
        &result.quality);
    if (!status.ok()) return status;
    // Skipped frames change what follows (their time is added to the next
    // frame's): only a stream with none must match the batch frame for
    // frame.
    for (int f = 0; f < total && result.skipped == 0 && result.errors == 0;
         ++f) {
      const v1::RetargetResponse& live = result.answers[f];
      if (!live.skipped() && live.target().SerializeAsString() !=
                                 offline[f].target().SerializeAsString()) {
        ++result.live_mismatches;
      }
    }
  }
  if (static_cast<int>(result.answers.size()) != total) {
    return absl::DataLossError(absl::StrCat("sent ", total, " frames, ",
                                            result.answers.size(),
                                            " answered"));
  }
  return result;
}

}  // namespace reach::client
