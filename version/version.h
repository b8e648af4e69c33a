// What `--version` prints, for every shipped binary: the version from the
// top-level CMakeLists.txt's project(... VERSION ...), the build type, and
// the git commit of the source tree when it was configured.
#ifndef REACH_VERSION_VERSION_H_
#define REACH_VERSION_VERSION_H_

#include <string>

#include "absl/strings/string_view.h"

namespace reach {

// "0.2.0": PROJECT_VERSION.
absl::string_view Version();
// "Release", "RelWithDebInfo", ... (CMAKE_BUILD_TYPE, or the configuration
// of a multi-config generator), with "+ASan+UBSan" for a REACH_SANITIZE
// build.
absl::string_view BuildType();
// The commit (12 hex digits) HEAD named when CMake last configured the
// build; empty when it was not a git checkout.
absl::string_view GitCommit();

// "reach-server 0.2.0 (Release build, commit 557bc82a1b2c)"; without a
// known commit, "reach-server 0.2.0 (Release build)".
std::string VersionLine(absl::string_view program);

}  // namespace reach

#endif  // REACH_VERSION_VERSION_H_
