// `reach characterize FILE`: which joint of a skeleton file plays which
// humanoid role (retarget/characterize.h), decided locally, no server.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cli/common.h"
#include "importers/import_error.h"
#include "importers/skeleton_file.h"
#include "retarget/characterize.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"
#include "wire/convert.h"

namespace reach::cli {
namespace {

struct CharacterizeFlags {
  std::string file;
  std::vector<std::string> overrides;  // ROLE=JOINT
  int frame = -1;
  int skin = 0;
};

int RunCharacterize(const CharacterizeFlags& flags) {
  std::vector<retarget::RoleOverride> overrides;
  for (const std::string& o : flags.overrides) {
    absl::StatusOr<std::pair<std::string, std::string>> parsed =
        ParseRoleOverride(o, "--override");
    if (!parsed.ok()) return Fail(parsed.status(), kExitUsage);
    overrides.push_back({parsed->first, parsed->second});
  }
  std::string bytes;
  const absl::Status read = import::ReadFile(flags.file, &bytes);
  if (!read.ok()) return Fail(read, kExitFileError);
  import::SkeletonFileOptions options;
  options.gltf_skin = flags.skin;
  const absl::StatusOr<import::ImportedFile> imported =
      import::ImportSkeletonBytes(bytes, import::SkeletonFormat::kUnknown,
                                  flags.file, options);
  if (!imported.ok()) return Fail(imported.status(), kExitFileError);
  SkeletonDef def;
  const absl::Status converted = FromProto(imported->skeleton, &def);
  if (!converted.ok()) return Fail(converted, kExitFileError);
  const absl::StatusOr<Skeleton> skeleton = Skeleton::Create(std::move(def));
  if (!skeleton.ok()) return Fail(skeleton.status(), kExitFileError);
  Pose frame;
  const Pose* reference = nullptr;
  if (flags.frame >= 0) {
    if (!imported->clip) {
      return Fail(absl::InvalidArgumentError(
                      "--frame: only a BVH file has frames"),
                  kExitUsage);
    }
    if (flags.frame >= imported->clip->num_frames) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
                      "--frame: ", flags.frame, " is past the clip's ",
                      imported->clip->num_frames, " frames")),
                  kExitUsage);
    }
    imported->clip->FramePose(flags.frame, &frame);
    reference = &frame;
  }
  const absl::StatusOr<retarget::Characterization> c =
      retarget::Characterize(*skeleton, overrides, reference);
  if (!c.ok()) {
    return Fail(c.status(), absl::StrContains(c.status().message(),
                                              "overrides[")
                                ? kExitUsage
                                : kExitFileError);
  }
  std::fputs(retarget::FormatCharacterization(*skeleton, *c).c_str(), stdout);
  return kExitOk;
}

}  // namespace

void AddCharacterizeCommand(CLI::App& app, Command* run) {
  auto flags = std::make_shared<CharacterizeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "characterize",
      "Print which joint of a skeleton file (.json, .bvh, .urdf, .gltf, "
      ".glb) plays which humanoid role (pelvis, spine, neck, head, "
      "clavicle/upper_arm/forearm/hand, thigh/shin/foot/toe per side), how "
      "each was decided, and the joints left unmapped. Runs locally.");
  cmd->add_option("file", flags->file, "Skeleton file")->required();
  cmd->add_option("--override", flags->overrides,
                  "Give a role a joint: ROLE=JOINT, e.g. left.hand=LeftWrist "
                  "(repeatable)");
  cmd->add_option("--frame", flags->frame,
                  "BVH: read the shape from this frame (0-based) instead of "
                  "the rest pose, for rigs whose rest is no stance")
      ->check(NonNegative());
  cmd->add_option("--skin", flags->skin, "glTF: which skin")
      ->check(NonNegative());
  cmd->callback([=] { *run = [=] { return RunCharacterize(*flags); }; });
}

}  // namespace reach::cli
