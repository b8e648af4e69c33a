// What the fuzz targets share: a check that aborts naming what broke (a
// crash to libFuzzer and to the replay), quiet protobuf logs, the fixed
// skeletons the raw-bytes modes solve against, and a builder of skeletons
// and solve requests from fuzzed bytes (FuzzedDataProvider) that keeps most
// inputs valid, so the solvers run on most executions.
#ifndef REACH_TESTS_FUZZ_FUZZ_SUPPORT_H_
#define REACH_TESTS_FUZZ_FUZZ_SUPPORT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzzer/FuzzedDataProvider.h"
#include "google/protobuf/message.h"
#include "reach/v1/skeleton.pb.h"
#include "reach/v1/solve.pb.h"

namespace reach::fuzz {

// Prints "FILE:LINE: fuzz check failed: CONDITION: DETAIL" and aborts.
[[noreturn]] void Fail(const char* file, int line, const char* condition,
                       const std::string& detail);

// Aborts unless `condition` holds; `detail` (a std::string expression) is
// built only on failure.
#define REACH_FUZZ_CHECK(condition, detail)                             \
  do {                                                                  \
    if (!(condition)) {                                                 \
      ::reach::fuzz::Fail(__FILE__, __LINE__, #condition, (detail));    \
    }                                                                   \
  } while (0)

// Drops protobuf's log lines (invalid UTF-8 in a parsed string field is
// logged on every such input; the parse result says all the targets need).
void QuietProtobufLogs();

// Whether REACH_FUZZ_VERBOSE is set: targets then print what they refused,
// to see how many inputs reach the deep paths (solve_request_fuzz DIR).
bool Verbose();

// Whether every double in `message` (recursively) is 0 or has a magnitude
// in [1e-6, 1e4]: inputs on which the service must answer with finite
// numbers. Outside it (1e300, denormals, NaN that validation would refuse
// anyway) the targets check only what holds for any input.
bool AllModerate(const google::protobuf::Message& message);

// Real rigs, each a valid reach.v1.Skeleton: the humanoid and the limited
// humanoid of examples/, the Franka Panda arm (hinges with limits) and a
// two-bone leg with a hinge knee.
const std::vector<v1::Skeleton>& FixtureSkeletons();

// Draws inputs from fuzzed bytes. Numbers come mostly from a given range,
// sometimes its ends or its middle; in wild mode (set_wild) also extremes
// (NaN, infinities, 1e300, denormals, -0.0), out-of-range ints, raw
// quaternions and odd names. Exhausted bytes read as zeros, which mean "no"
// to Chance and "in range" everywhere else, so a short input is a tame one.
class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : fdp_(data, size) {}

  void set_wild(bool wild) { wild_ = wild; }
  bool wild() const { return wild_; }

  // True with probability about n / 256; false once the bytes run out.
  bool Chance(int n);
  // Chance(n) in wild mode; never otherwise: where a field gets broken.
  bool Break(int n) { return wild_ && Chance(n); }
  double Number(double lo, double hi);
  int Int(int lo, int hi);
  void Vec(double lo, double hi, v1::Vec3* out);
  // A unit quaternion (Shoemake's uniform sampling) or the identity; in
  // wild mode now and then four raw numbers.
  void Rotation(v1::Quat* out);
  // Names from a small alphabet, so they collide now and then.
  std::string Name(int max_length);
  FuzzedDataProvider& provider() { return fdp_; }

 private:
  FuzzedDataProvider fdp_;
  bool wild_ = false;
};

// A skeleton of 1..max_joints joints: a tree of parent-before-child joints
// "j0", "j1", ... of every type with rest transforms, axes, limits and
// stiffness, and up to four chains "c0".. from an ancestor to a
// descendant. About one skeleton in ten is wild (FuzzInput::set_wild): its
// fields are broken now and then (a forward parent, an empty or duplicate
// name, an unknown type, a limit out of range, a chain whose root is not
// above its tip, extreme numbers), so validation is fuzzed too; the others
// are valid.
v1::Skeleton BuildSkeleton(FuzzInput& in, int max_joints);

// A request of 1..max_goals goals on `skeleton` (any solver, including
// SOLVER_FULL_BODY, by chain or by joint names, with targets, orientations,
// poles, weights, the options each solver takes, aim axes and priorities),
// full-body options and sometimes a start pose. Iterations are kept small
// (at most 32 per goal, mostly set; full-body at most 16; 2 restarts; 2 ms
// budgets) so an execution stays short. About one request in ten is wild,
// as for BuildSkeleton: unknown names and enum values, goal counts and
// options out of range, options for solvers that refuse them.
v1::SolveRequest BuildRequest(FuzzInput& in, const v1::Skeleton& skeleton,
                              int max_goals);

}  // namespace reach::fuzz

#endif  // REACH_TESTS_FUZZ_FUZZ_SUPPORT_H_
