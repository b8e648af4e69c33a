// `reach retarget SOURCE.bvh --to TARGET --out OUT.bvh`: a clip retargeted
// onto another rig by the server (reach.v1.RetargetService), offline
// through RetargetBatch or live through RetargetStream at the clip's rate.
// `--to CHARACTER.glb --out OUT.glb` writes the motion into a copy of the
// character's own file instead (importers/gltf_animation.h).
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cli/common.h"
#include "client/retarget_clip.h"
#include "importers/gltf_animation.h"
#include "importers/import_error.h"
#include "importers/skeleton_file.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"
#include "wire/convert.h"

namespace reach::cli {
namespace {

struct RetargetFlags {
  std::string file;
  std::string to;
  std::string out;
  bool live = false;
  bool report = false;
  double fps = 0;
  bool max_rate = false;
  bool latest_wins = false;
  int window = 8;
  int batch_frames = 4000;
  int first = 0;
  int frames = -1;
  int source_frame = -1;
  int target_frame = -1;
  ProfileFlags profile;
  std::vector<std::string> no_ik;
  double pelvis_scale = 0;
  bool json = false;
  bool quiet = false;
};

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

// What --out writes, by its extension: .glb a copy of the target's .glb
// with the motion added, anything else BVH.
bool IsGlb(absl::string_view path) {
  return absl::EndsWithIgnoreCase(path, ".glb");
}

// Checks --out before any work: its form goes with --to, and the file can
// be written. Errors name the flag; *code is the exit code.
absl::Status CheckOut(const RetargetFlags& flags, int* code) {
  *code = kExitUsage;
  const std::string& out = flags.out;
  if (absl::EndsWithIgnoreCase(out, ".gltf")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--out ", out, ": glTF is written as a binary .glb; name it .glb"));
  }
  if (IsGlb(out) && !IsGlb(flags.to)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--out ", out,
        ": a .glb is written as a copy of the target's own .glb file, and "
        "--to ",
        flags.to,
        " is not one (give --to the character's .glb, or --out a .bvh "
        "file)"));
  }
  *code = kExitFileError;
  struct stat st;
  if (stat(out.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--out ", out, ": is a directory"));
    }
    if (access(out.c_str(), W_OK) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--out ", out, ": cannot write it: ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }
  const size_t slash = out.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : out.substr(0, slash);
  if (access(dir.c_str(), W_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--out ", out, ": cannot write in ", dir, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// Writes `bytes` to --out; errors name the flag.
absl::Status WriteOut(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--out ", path, ": cannot write it: ", std::strerror(errno)));
  }
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    return absl::InvalidArgumentError(
        absl::StrCat("--out ", path, ": write failed"));
  }
  return absl::OkStatus();
}

// The profile options the flags ask for; errors name the flag.
absl::Status SpecFromFlags(const RetargetFlags& flags,
                           v1::RetargetProfileSpec* spec) {
  if (absl::Status s = ApplyProfileFlags(flags.profile, spec); !s.ok()) {
    return s;
  }
  for (const std::string& limb : flags.no_ik) {
    if (limb == "left_arm") {
      spec->set_no_left_arm_ik(true);
    } else if (limb == "right_arm") {
      spec->set_no_right_arm_ik(true);
    } else if (limb == "left_leg") {
      spec->set_no_left_leg_ik(true);
    } else if (limb == "right_leg") {
      spec->set_no_right_leg_ik(true);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--no-ik: \"", limb,
          "\" is not one of left_arm, right_arm, left_leg, right_leg"));
    }
  }
  spec->set_pelvis_scale(flags.pelvis_scale);
  return absl::OkStatus();
}

void PrintQuality(const v1::RetargetQuality& q) {
  std::printf(
      "quality over %d frames: %d of %d mapped joints move%s%s\n"
      "  hips over legs within %.2f%% of the source's (standing frames)\n"
      "  bone directions: bones without goals mean %.2f max %.2f deg; limb "
      "bones mean %.2f max %.2f deg\n"
      "  goals within %.3g of the body's height (%.4g units)\n"
      "  feet: %d contacts, slide %.3g legs (%.3g units), below the floor "
      "%.3g legs\n"
      "  largest step beyond the source's: %.2f deg%s%s\n",
      q.frames(), q.mapped_joints() - q.unmoved_joints_size(), q.mapped_joints(),
      q.unmoved_joints_size() > 0 ? "; never moved: " : "",
      absl::StrJoin(q.unmoved_joints(), ", ").c_str(),
      100 * q.hips_ratio_worst(), q.bones_mean_deg(), q.bones_max_deg(),
      q.limb_bones_mean_deg(), q.limb_bones_max_deg(), q.goal_worst(),
      q.body_height(), q.contacts(), q.slide_worst(), q.slide_worst() * q.leg_length(),
      q.below_floor_worst(), q.step_excess_worst_deg(),
      q.step_excess_role().empty() ? "" : " at ", q.step_excess_role().c_str());
}

int RunRetarget(const Globals& globals, const RetargetFlags& flags) {
  if (!flags.out.empty()) {
    int code = kExitUsage;
    if (absl::Status s = CheckOut(flags, &code); !s.ok()) return Fail(s, code);
  }
  client::RetargetClipOptions options;
  options.target = flags.to;
  options.source_reference_frame = flags.source_frame;
  options.target_reference_frame = flags.target_frame;
  if (absl::Status s = SpecFromFlags(flags, &options.spec); !s.ok()) {
    return Fail(s, kExitUsage);
  }
  options.first_frame = flags.first;
  options.max_frames = flags.frames;
  options.live = flags.live;
  options.fps = flags.max_rate ? -1 : flags.fps;
  options.max_in_flight = flags.window;
  options.batch_frames = flags.batch_frames;
  options.latest_wins = flags.latest_wins;
  options.report = flags.report;
  options.timeout = absl::Seconds(globals.timeout_s);
  if (!flags.quiet && isatty(STDERR_FILENO)) {
    options.progress = [](int sent, int total) {
      std::fprintf(stderr, "\rframe %d/%d", sent, total);
      if (sent == total) std::fprintf(stderr, "\n");
    };
  }
  auto made = MakeClient(globals);
  if (!made.ok()) return FailSetup(made.status());
  auto client = *std::move(made);
  absl::StatusOr<client::RetargetClipResult> result =
      client::RetargetClip(*client, flags.file, options);
  if (!result.ok()) {
    // What the command line named (a flag, a file) or what the server said.
    const absl::string_view message = result.status().message();
    if (absl::StartsWith(message, "--")) return Fail(result.status(), kExitUsage);
    // A file that could not be read here (errors from the server name
    // their RPC first).
    if (absl::StartsWith(message, flags.file) ||
        absl::StartsWith(message, flags.to)) {
      return Fail(result.status(), kExitFileError);
    }
    return FailRpc(result.status());
  }
  const client::RetargetClipResult& r = *result;

  if (!flags.out.empty()) {
    SkeletonDef def;
    if (absl::Status s = FromProto(r.target, &def); !s.ok()) return FailRpc(s);
    absl::StatusOr<Skeleton> target = Skeleton::Create(std::move(def));
    if (!target.ok()) return FailRpc(target.status());
    std::vector<Pose> poses;
    poses.reserve(r.answers.size());
    Pose pose = RestPose(*target);
    for (const v1::RetargetResponse& answer : r.answers) {
      // A skipped or failed frame repeats the previous pose.
      if (!answer.skipped() && !answer.has_error()) {
        if (absl::Status s = FromProto(*target, answer.target(), &pose,
                                       "target");
            !s.ok()) {
          return FailRpc(s);
        }
      }
      poses.push_back(pose);
    }
    if (IsGlb(flags.out)) {
      // The target's own file, with the motion as one more animation named
      // after the clip.
      std::string contents;
      if (absl::Status s = import::ReadFile(flags.to, &contents); !s.ok()) {
        return Fail(s, kExitFileError);
      }
      import::GltfAnimationOptions glb;
      glb.name = import::FileStem(flags.file);
      absl::StatusOr<std::string> bytes = import::WriteGltfAnimation(
          contents, flags.to, *target, poses, r.frame_time_s, glb);
      if (!bytes.ok()) return Fail(bytes.status(), kExitFileError);
      if (absl::Status s = WriteOut(flags.out, *bytes); !s.ok()) {
        return Fail(s, kExitFileError);
      }
    } else {
      const absl::Status written =
          WriteBvhFile(flags.out, *target, poses, r.frame_time_s);
      if (!written.ok()) return Fail(written, kExitFileError);
    }
  }


  int unreached = 0;
  for (const v1::RetargetResponse& answer : r.answers) {
    for (const v1::LimbOutcome* limb :
         {&answer.left_hand(), &answer.right_hand(), &answer.left_foot(),
          &answer.right_foot()}) {
      if (limb->active() && !limb->reached()) ++unreached;
    }
  }
  if (flags.json) {
    std::string quality = "[";
    for (const v1::RetargetQuality& q : r.quality) {
      absl::StrAppend(&quality, quality.size() > 1 ? "," : "", ToJson(q));
    }
    quality += "]";
    absl::PrintF(
        "{\"file\":%s,\"to\":%s,\"profileId\":\"%s\",\"frames\":%d,"
        "\"skipped\":%d,\"errors\":%d,\"unsolved\":%d,"
        "\"unreachedGoals\":%d,\"seconds\":%.6f,\"fps\":%.3f,"
        "\"p50Ms\":%.4f,\"p99Ms\":%.4f,\"maxMs\":%.4f,\"liveMismatches\":%d,"
        "\"quality\":%s}\n",
        JsonString(flags.file), JsonString(flags.to),
        r.profile.profile_id(), static_cast<int>(r.answers.size()), r.skipped,
        r.errors, r.unsolved, unreached, r.seconds, r.fps, Ms(r.p50), Ms(r.p99), Ms(r.max_latency),
        r.live_mismatches, quality);
  } else {
    std::printf("profile %s: %s (%d joints) -> %s (%d joints), pelvis scale "
                "%.4g; %d target joints unmapped (they keep the retarget "
                "pose)\n",
                r.profile.profile_id().c_str(), r.source.name().c_str(),
                r.source.joints_size(), r.target.name().c_str(),
                r.target.joints_size(), r.profile.pelvis_scale(),
                r.profile.target().unmapped_size());
    for (const auto* side : {&r.profile.source(), &r.profile.target()}) {
      for (const std::string& warning : side->warnings()) {
        std::printf("warning (%s): %s\n",
                    side == &r.profile.source() ? "source" : "target",
                    warning.c_str());
      }
    }
    std::printf("retargeted %zu frames %s: %d skipped, %d errors%s%s, %d "
                "hand/foot goals not reached%s\n",
                r.answers.size(),
                flags.live ? "live over RetargetStream" : "with RetargetBatch",
                r.skipped, r.errors, r.errors > 0 ? " (first: " : "",
                r.errors > 0 ? (r.first_error + ")").c_str() : "", unreached,
                r.unsolved > 0
                    ? absl::StrCat(" (", r.unsolved,
                                   " frames past the server's solve time, "
                                   "unsolved: send fewer per call with "
                                   "--batch-frames)")
                          .c_str()
                    : "");
    std::printf("rate: %.1f frames/s over %.2f s", r.fps, r.seconds);
    if (flags.live) {
      std::printf("; round trip p50 %.3f ms, p99 %.3f ms, max %.3f ms",
                  Ms(r.p50), Ms(r.p99), Ms(r.max_latency));
    }
    std::printf("\n");
    for (const v1::RetargetQuality& q : r.quality) PrintQuality(q);
    if (flags.live && flags.report) {
      std::printf("live answers equal to the batch's: %s\n",
                  r.skipped > 0 ? "not compared (frames were skipped)"
                  : r.live_mismatches == 0
                      ? "yes"
                      : absl::StrCat("no, ", r.live_mismatches, " differ")
                            .c_str());
    }
    if (!flags.out.empty()) {
      std::printf("wrote %s (%zu frames)\n", flags.out.c_str(),
                  r.answers.size());
    }
  }
  return r.live_mismatches > 0 || r.errors > 0 ? kExitCheckFailed : kExitOk;
}

}  // namespace

void AddRetargetCommand(CLI::App& app, const Globals& globals, Command* run) {
  auto flags = std::make_shared<RetargetFlags>();
  CLI::App* cmd = app.add_subcommand(
      "retarget",
      "Retarget a BVH clip onto another rig (any names, rest pose, units and "
      "proportions) on the server: both files are imported there, a retarget "
      "profile is made (roles found by name and shape), and the frames are "
      "retargeted with hands and feet solved and feet planted. Offline "
      "(RetargetBatch) by default, or live over RetargetStream at the clip's "
      "rate.");
  cmd->add_option("file", flags->file, "Source BVH clip")->required();
  cmd->add_option("--to", flags->to,
                  "Target rig: a skeleton file (.bvh, .gltf, .glb, .json, "
                  ".urdf) or a registered skeleton id")
      ->required();
  cmd->add_option("--out", flags->out,
                  "Write the retargeted motion: OUT.glb (with --to a .glb) a "
                  "copy of the target's file with the motion as one more "
                  "animation; any other name BVH on the target rig");
  cmd->add_flag("--live", flags->live,
                "Stream the frames over RetargetStream at the clip's rate");
  cmd->add_flag("--report", flags->report,
                "Print the retarget's quality figures (live: from a batch of "
                "the same frames, checked equal to the stream's answers)");
  auto* fps = cmd->add_option("--fps", flags->fps,
                              "Live: frames per second (default: the clip's "
                              "rate)");
  fps->check(Positive());
  cmd->add_flag("--max-rate", flags->max_rate,
                "Live: send as fast as the window allows")
      ->excludes(fps);
  cmd->add_option("--batch-frames", flags->batch_frames,
                  "Offline: frames per RetargetBatch call at most (each call "
                  "starts a new state)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  cmd->add_flag("--latest-wins", flags->latest_wins,
                "Live: let the server skip frames that fall behind");
  cmd->add_option("--window", flags->window,
                  "Live: frames in flight at most (back-pressure)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--first", flags->first, "First frame")
      ->check(NonNegative());
  cmd->add_option("--frames", flags->frames, "Frames to send (default: all)")
      ->check(NonNegative());
  cmd->add_option("--source-frame", flags->source_frame,
                  "The source's retarget pose is this frame of the clip "
                  "(default: its rest pose), for rigs whose rest is no stance")
      ->check(NonNegative());
  cmd->add_option("--target-frame", flags->target_frame,
                  "A BVH target's retarget pose is this frame of it")
      ->check(NonNegative());
  AddProfileFlags(cmd, &flags->profile,
                  "Use the target's rest (or --target-frame) as its retarget "
                  "pose instead of turning its limbs to the source's");
  cmd->add_option("--no-ik", flags->no_ik,
                  "Limbs left to the transferred pose: left_arm, right_arm, "
                  "left_leg, right_leg (comma-separated or repeated)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->delimiter(',');
  cmd->add_option("--pelvis-scale", flags->pelvis_scale,
                  "The pelvis' motion scale (default: the legs' ratio)")
      ->check(NonNegative());
  cmd->add_flag("--json", flags->json, "Print the result as JSON");
  cmd->add_flag("--quiet", flags->quiet, "No progress line");
  cmd->callback([=, &globals] {
    *run = [=, &globals] { return RunRetarget(globals, *flags); };
  });
}

}  // namespace reach::cli
