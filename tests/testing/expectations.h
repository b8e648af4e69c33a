// GoogleTest expectations shared by the solver tests.
#ifndef REACH_TESTS_TESTING_EXPECTATIONS_H_
#define REACH_TESTS_TESTING_EXPECTATIONS_H_

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

#include "solvers/pose.h"
#include "solvers/skeleton.h"
#include "tests/testing/models.h"

namespace reach::testing {

// Every joint keeps its distance to its parent (within 1e-9 model units)
// between two poses: solvers turn joints and never stretch bones.
inline void ExpectBoneLengthsKept(const Skeleton& skeleton, const Pose& before,
                                  const Pose& after) {
  const std::vector<double> a = BoneLengths(skeleton, before);
  const std::vector<double> b = BoneLengths(skeleton, after);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(b[i], a[i], 1e-9) << "joint " << i;
  }
}

// `text` as a regular expression that matches exactly it (GoogleTest's
// POSIX extended expressions): build types such as
// "RelWithDebInfo+ASan+UBSan" carry metacharacters.
inline std::string RegexLiteral(absl::string_view text) {
  std::string out;
  for (const char c : text) {
    if (absl::string_view("\\^$.|?*+()[]{}").find(c) !=
        absl::string_view::npos) {
      out.push_back('\\');
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace reach::testing

#endif  // REACH_TESTS_TESTING_EXPECTATIONS_H_
