// stream: replay a BVH clip as live IK targets.
#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli/common.h"
#include "importers/bvh.h"
#include "client/mocap_replay.h"
#include "wire/convert.h"

namespace reach::cli {
namespace {

struct StreamFlags {
  std::string file;
  std::string skeleton;
  double fps = 0;
  bool max_rate = false;
  bool latest_wins = false;
  std::string out;
  std::vector<std::string> chains;
  std::string solver = "auto";
  int window = 8;
  int first = 0;
  int frames = -1;
  bool json = false;
  bool quiet = false;
};

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

int RunStream(const Globals& globals, const StreamFlags& flags) {
  absl::StatusOr<import::BvhClip> clip = import::ImportBvh(flags.file);
  if (!clip.ok()) return Fail(clip.status(), kExitFileError);
  absl::StatusOr<v1::Solver> solver = ParseSolver(flags.solver);
  if (!solver.ok()) return Fail(solver.status(), kExitUsage);

  auto made = MakeClient(globals);
  if (!made.ok()) return FailSetup(made.status());
  auto client = *std::move(made);
  std::string id = flags.skeleton;
  v1::Skeleton wire;
  if (id.empty()) {
    // The clip's own skeleton (registration is idempotent).
    ToProto(clip->skeleton.def, &wire);
    wire.set_name(clip->skeleton.name);
    absl::StatusOr<v1::RegisterSkeletonResponse> registered =
        client->Register(wire);
    if (!registered.ok()) return FailRpc(registered.status());
    id = registered->skeleton_id();
  } else {
    absl::StatusOr<v1::GetSkeletonResponse> got = client->GetSkeleton(id);
    if (!got.ok()) return FailRpc(got.status());
    wire = got->skeleton();
  }
  SkeletonDef def;
  if (absl::Status s = FromProto(wire, &def); !s.ok()) return FailRpc(s);
  absl::StatusOr<Skeleton> target = Skeleton::Create(std::move(def));
  if (!target.ok()) return FailRpc(target.status());

  client::ReplayOptions options;
  options.fps = flags.max_rate ? 0
                : flags.fps > 0 ? flags.fps
                                : 1.0 / clip->frame_time;
  options.latest_wins = flags.latest_wins;
  options.max_in_flight = flags.window;
  options.first_frame = flags.first;
  options.max_frames = flags.frames;
  options.keep_poses = !flags.out.empty();
  options.timeout = absl::Seconds(globals.timeout_s);
  const bool show_progress = !flags.quiet && isatty(STDERR_FILENO);
  if (show_progress) {
    options.progress = [](int sent, int total) {
      std::fprintf(stderr, "\rframe %d/%d", sent, total);
      if (sent == total) std::fprintf(stderr, "\n");
    };
  }
  absl::StatusOr<client::MocapRetarget> retarget =
      client::MocapRetarget::Create(*clip, *target, flags.chains);
  if (!retarget.ok()) return Fail(retarget.status(), kExitUsage);
  retarget->solver = *solver;

  absl::StatusOr<client::ReplayReport> report =
      client::ReplayMocap(*client, id, *retarget, options);
  if (!report.ok()) return FailRpc(report.status());
  const client::ReplayReport& r = *report;

  if (!flags.out.empty()) {
    const absl::Status written =
        WriteBvhFile(flags.out, *target, r.poses, clip->frame_time);
    if (!written.ok()) return Fail(written, kExitFileError);
  }
  const double relative =
      r.target_height > 0 ? r.mean_error / r.target_height : 0;
  if (flags.json) {
    absl::PrintF(
        "{\"file\":%s,\"skeletonId\":\"%s\",\"chains\":[\"%s\"],"
        "\"frames\":%d,\"solved\":%d,\"skipped\":%d,\"errors\":%d,"
        "\"firstError\":%s,\"meanError\":%.9g,\"maxError\":%.9g,"
        "\"meanErrorOfHeight\":%.9g,\"meanStartError\":%.9g,\"height\":%.9g,\"seconds\":%.6f,"
        "\"fps\":%.3f,\"p50Ms\":%.4f,\"p99Ms\":%.4f,\"maxMs\":%.4f,"
        "\"resumes\":%d}\n",
        JsonString(flags.file), id,
        absl::StrJoin(retarget->chains(), "\",\""), r.frames, r.solved,
        r.skipped, r.errors, JsonString(r.first_error), r.mean_error,
        r.max_error, relative, r.mean_start_error, r.target_height, r.seconds, r.fps, Ms(r.p50),
        Ms(r.p99), Ms(r.max_latency), r.resumes);
  } else {
    std::printf("streamed %d frames of %s onto %s (chains %s)\n", r.frames,
                flags.file.c_str(), id.c_str(),
                absl::StrJoin(retarget->chains(), ", ").c_str());
    std::printf("answered: %d solved, %d skipped, %d errors%s%s\n", r.solved,
                r.skipped, r.errors, r.first_error.empty() ? "" : "; first: ",
                r.first_error.c_str());
    std::printf("end-effector error: mean %.3g, max %.3g model units "
                "(mean %.3g of the skeleton's height %.4g; start poses were "
                "%.3g off)\n",
                r.mean_error, r.max_error, relative, r.target_height,
                r.mean_start_error);
    std::printf("rate: %.1f frames/s over %.2f s; round trip p50 %.3f ms, "
                "p99 %.3f ms, max %.3f ms\n",
                r.fps, r.seconds, Ms(r.p50), Ms(r.p99), Ms(r.max_latency));
    if (r.resumes > 0) {
      std::printf("the stream's replica went away: reopened %d time%s\n",
                  r.resumes, r.resumes == 1 ? "" : "s");
    }
    if (!flags.out.empty()) {
      std::printf("wrote %s (%zu frames)\n", flags.out.c_str(),
                  r.poses.size());
    }
  }
  return r.errors > 0 ? kExitCheckFailed : kExitOk;
}

}  // namespace

void AddStreamCommand(CLI::App& app, const Globals& globals, Command* run) {
  auto flags = std::make_shared<StreamFlags>();
  CLI::App* stream = app.add_subcommand(
      "stream",
      "Replay a BVH clip as live targets over SolveStream: hand and foot "
      "positions of each frame (scaled by limb length onto the target "
      "skeleton) are solved, and the answers checked by forward kinematics.");
  stream->add_option("file", flags->file, "BVH motion capture file")
      ->required();
  stream->add_option("--skeleton", flags->skeleton,
                     "Registered skeleton to drive (default: register the "
                     "clip's own skeleton)");
  auto* fps = stream->add_option(
      "--fps", flags->fps, "Frames per second (default: the clip's rate)");
  fps->check(Positive());
  stream->add_flag("--max-rate", flags->max_rate,
                   "Send as fast as the window allows")
      ->excludes(fps);
  stream->add_flag("--latest-wins", flags->latest_wins,
                   "Let the server skip frames that fall behind (live mocap)");
  stream->add_option("--out", flags->out, "Write the solved motion as BVH");
  stream->add_option("--chains", flags->chains,
                     "Chains to drive (default: every chain both skeletons "
                     "have)")
      ->delimiter(',');
  stream->add_option("--solver", flags->solver, "One of: " + SolverNames())
      ->capture_default_str();
  stream->add_option("--window", flags->window,
                     "Frames in flight at most (back-pressure)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  stream->add_option("--first", flags->first, "First frame")
      ->check(NonNegative());
  stream->add_option("--frames", flags->frames, "Frames to send (default: all)")
      ->check(NonNegative());
  stream->add_flag("--json", flags->json, "Print the report as JSON");
  stream->add_flag("--quiet", flags->quiet, "No progress line");
  stream->callback([=, &globals] {
    *run = [=, &globals] { return RunStream(globals, *flags); };
  });
}

}  // namespace reach::cli
