#include "version/version.h"

#include "absl/strings/str_cat.h"

// Defined by version/CMakeLists.txt for this file alone, so a new commit or
// build type recompiles nothing else.
#ifndef REACH_VERSION
#error "REACH_VERSION is not defined"
#endif

namespace reach {

absl::string_view Version() { return REACH_VERSION; }

absl::string_view BuildType() { return REACH_BUILD_TYPE; }

absl::string_view GitCommit() { return REACH_GIT_COMMIT; }

std::string VersionLine(absl::string_view program) {
  const absl::string_view build =
      BuildType().empty() ? absl::string_view("unknown") : BuildType();
  return absl::StrCat(
      program, " ", Version(), " (", build, " build",
      GitCommit().empty() ? "" : absl::StrCat(", commit ", GitCommit()), ")");
}

}  // namespace reach
