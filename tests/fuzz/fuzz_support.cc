#include "tests/fuzz/fuzz_support.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/util/json_util.h"
#include "wire/convert.h"
#include "tests/testing/models.h"

namespace reach::fuzz {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

constexpr double kPi = M_PI;

bool Moderate(double v) {
  const double a = std::abs(v);
  return v == 0.0 || (a >= 1e-6 && a <= 1e4);
}

v1::Skeleton SkeletonFromJson(const std::string& file) {
  const std::string path = absl::StrCat(REACH_SOURCE_DIR, "/", file);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  v1::Skeleton skeleton;
  const auto status =
      google::protobuf::util::JsonStringToMessage(text.str(), &skeleton);
  if (!in || !status.ok()) {
    Fail(__FILE__, __LINE__, "fixture loads",
         absl::StrCat(path, ": ", status.ToString()));
  }
  return skeleton;
}

v1::Skeleton SkeletonFromDef(const SkeletonDef& def, const std::string& name) {
  v1::Skeleton skeleton;
  ToProto(def, &skeleton);
  skeleton.set_name(name);
  return skeleton;
}

// Joint i's parent when it is a valid one (before i), else -1.
int ValidParent(const v1::Skeleton& skeleton, int i) {
  const int p = skeleton.joints(i).parent();
  return p >= 0 && p < i ? p : -1;
}

// The joint `up` steps above `joint`, or -1 when the walk leaves the tree.
int Ancestor(const v1::Skeleton& skeleton, int joint, int up) {
  for (int k = 0; k < up && joint >= 0; ++k) {
    joint = ValidParent(skeleton, joint);
  }
  return joint;
}

}  // namespace

void Fail(const char* file, int line, const char* condition,
          const std::string& detail) {
  std::fprintf(stderr, "%s:%d: fuzz check failed: %s: %s\n", file, line,
               condition, detail.c_str());
  std::fflush(stderr);
  std::abort();
}

bool Verbose() {
  static const bool verbose = std::getenv("REACH_FUZZ_VERBOSE") != nullptr;
  return verbose;
}

void QuietProtobufLogs() {
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel, const char*, int, const std::string&) {});
}

bool AllModerate(const Message& message) {
  const Reflection* reflection = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const FieldDescriptor* field : fields) {
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
      if (field->is_repeated()) {
        for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
          if (!Moderate(reflection->GetRepeatedDouble(message, field, i))) {
            return false;
          }
        }
      } else if (!Moderate(reflection->GetDouble(message, field))) {
        return false;
      }
    } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (field->is_repeated()) {
        for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
          if (!AllModerate(reflection->GetRepeatedMessage(message, field, i))) {
            return false;
          }
        }
      } else if (!AllModerate(reflection->GetMessage(message, field))) {
        return false;
      }
    }
  }
  return true;
}

const std::vector<v1::Skeleton>& FixtureSkeletons() {
  static const std::vector<v1::Skeleton>* const fixtures =
      new std::vector<v1::Skeleton>{
          SkeletonFromJson("examples/humanoid.skeleton.json"),
          SkeletonFromJson("examples/humanoid_limited.skeleton.json"),
          SkeletonFromDef(testing::PandaDef(), "panda"),
          SkeletonFromDef(testing::TwoBoneLegDef(/*hinge_knee=*/true),
                          "hinge leg"),
      };
  return *fixtures;
}

bool FuzzInput::Chance(int n) {
  return fdp_.ConsumeIntegral<uint8_t>() >= 256 - n;
}

double FuzzInput::Number(double lo, double hi) {
  static constexpr double kExtremes[] = {
      std::numeric_limits<double>::quiet_NaN(),
      std::numeric_limits<double>::infinity(),
      -std::numeric_limits<double>::infinity(),
      -0.0,
      1e300,
      -1e300,
      1e-300,
      std::numeric_limits<double>::denorm_min(),
      std::numeric_limits<double>::max(),
      std::numeric_limits<double>::lowest(),
      1e10,
      -1e10,
      1.0 + 1e-15,
      2 * kPi + 1e-9,
      kPi,
      -kPi,
  };
  const uint8_t kind = fdp_.ConsumeIntegral<uint8_t>();
  if (kind >= 240 && wild_) return kExtremes[kind - 240];
  if (kind >= 208) {
    const double ends[] = {lo, hi, 0.5 * (lo + hi),
                           lo <= 0.0 && 0.0 <= hi ? 0.0 : lo};
    return ends[kind % 4];
  }
  return fdp_.ConsumeFloatingPointInRange(lo, hi);
}

int FuzzInput::Int(int lo, int hi) {
  const uint8_t kind = fdp_.ConsumeIntegral<uint8_t>();
  if (kind >= 248 && wild_) {
    const int extremes[] = {-1,
                            lo - 1,
                            hi + 1,
                            1000,
                            100000,
                            100001,
                            std::numeric_limits<int>::max(),
                            std::numeric_limits<int>::min()};
    return extremes[kind - 248];
  }
  return fdp_.ConsumeIntegralInRange(lo, hi);
}

void FuzzInput::Vec(double lo, double hi, v1::Vec3* out) {
  out->set_x(Number(lo, hi));
  out->set_y(Number(lo, hi));
  out->set_z(Number(lo, hi));
}

void FuzzInput::Rotation(v1::Quat* out) {
  if (Break(16)) {
    out->set_w(Number(-1.5, 1.5));
    out->set_x(Number(-1.5, 1.5));
    out->set_y(Number(-1.5, 1.5));
    out->set_z(Number(-1.5, 1.5));
    return;
  }
  if (Chance(24)) {
    out->set_w(1.0);
    return;
  }
  // Shoemake, "Uniform random rotations" (Graphics Gems III, 1992).
  const double u1 = fdp_.ConsumeProbability<double>();
  const double u2 = fdp_.ConsumeProbability<double>();
  const double u3 = fdp_.ConsumeProbability<double>();
  const double a = std::sqrt(1.0 - u1);
  const double b = std::sqrt(u1);
  out->set_x(a * std::sin(2 * kPi * u2));
  out->set_y(a * std::cos(2 * kPi * u2));
  out->set_z(b * std::sin(2 * kPi * u3));
  out->set_w(b * std::cos(2 * kPi * u3));
}

std::string FuzzInput::Name(int max_length) {
  static constexpr char kAlphabet[] = "jc0_1 ";
  const int length = fdp_.ConsumeIntegralInRange(0, max_length);
  std::string name;
  for (int i = 0; i < length; ++i) {
    name += kAlphabet[fdp_.ConsumeIntegralInRange<int>(
        0, sizeof(kAlphabet) - 2)];
  }
  return name;
}

v1::Skeleton BuildSkeleton(FuzzInput& in, int max_joints) {
  FuzzedDataProvider& fdp = in.provider();
  in.set_wild(in.Chance(24));
  v1::Skeleton skeleton;
  skeleton.set_name(in.Break(32) ? in.Name(6) : "fuzz");
  // Counted down, so that exhausted bytes (zeros) mean the largest.
  const int n = max_joints - fdp.ConsumeIntegralInRange(0, max_joints - 1);
  for (int i = 0; i < n; ++i) {
    v1::Joint* joint = skeleton.add_joints();
    joint->set_name(in.Break(8) ? in.Name(3) : absl::StrCat("j", i));
    if (i == 0) {
      joint->set_parent(in.Break(8) ? in.Int(-2, 2) : -1);
    } else if (in.Break(8)) {
      joint->set_parent(fdp.ConsumeIntegralInRange(i, i + 1));  // Forward.
    } else {
      const uint8_t kind = fdp.ConsumeIntegral<uint8_t>();
      joint->set_parent(kind < 176   ? i - 1
                        : kind < 240 ? fdp.ConsumeIntegralInRange(0, i - 1)
                                     : -1);  // Another root.
    }
    if (!in.Chance(16)) {
      v1::Transform* rest = joint->mutable_rest();
      if (!in.Chance(24)) in.Vec(-1.0, 1.0, rest->mutable_translation());
      if (in.Chance(128)) in.Rotation(rest->mutable_rotation());
      if (in.Chance(24)) rest->set_scale(in.Number(0.2, 3.0));
    }
    const uint8_t type = fdp.ConsumeIntegral<uint8_t>();
    int type_value = type < 96    ? v1::JOINT_TYPE_BALL
                     : type < 168 ? v1::JOINT_TYPE_HINGE
                     : type < 216 ? v1::JOINT_TYPE_FIXED
                                  : v1::JOINT_TYPE_UNSPECIFIED;
    if (in.Break(8)) type_value = in.Int(4, 100);
    joint->set_type(static_cast<v1::JointType>(type_value));
    const bool hinge = type_value == v1::JOINT_TYPE_HINGE;
    const bool ball = type_value == v1::JOINT_TYPE_BALL ||
                      type_value == v1::JOINT_TYPE_UNSPECIFIED;
    if (hinge ? !in.Break(16) : in.Chance(40)) {
      in.Vec(-1.0, 1.0, joint->mutable_axis());
    }
    if (hinge && in.Chance(128)) {
      joint->set_min_angle_rad(in.Number(-2 * kPi, 0.0));
      joint->set_max_angle_rad(in.Number(0.0, 2 * kPi));
    } else if (ball && in.Chance(64)) {
      joint->set_min_angle_rad(in.Number(-kPi, 0.0));
      joint->set_max_angle_rad(in.Number(0.0, kPi));
    }
    if (ball && in.Chance(64)) joint->set_max_swing_rad(in.Number(0.0, kPi));
    if (in.Break(8)) joint->set_min_angle_rad(in.Number(-7.0, 7.0));
    if (in.Break(8)) joint->set_max_swing_rad(in.Number(-1.0, 4.0));
    if (in.Chance(40)) joint->set_stiffness(in.Number(0.0, 1.0));
    if (in.Break(8)) joint->set_stiffness(in.Number(-1.0, 2.0));
  }
  const int chains = fdp.ConsumeIntegralInRange(0, 4);
  for (int c = 0; c < chains; ++c) {
    const int tip = n - 1 - fdp.ConsumeIntegralInRange(0, n - 1);
    int root = Ancestor(skeleton, tip, fdp.ConsumeIntegralInRange(1, 6));
    if (in.Break(16)) root = fdp.ConsumeIntegralInRange(0, n - 1);
    if (root < 0) continue;
    v1::Chain* chain = skeleton.add_chains();
    chain->set_name(in.Break(16) ? in.Name(2) : absl::StrCat("c", c));
    chain->set_root(skeleton.joints(root).name());
    chain->set_tip(skeleton.joints(tip).name());
  }
  return skeleton;
}

v1::SolveRequest BuildRequest(FuzzInput& in, const v1::Skeleton& skeleton,
                              int max_goals) {
  FuzzedDataProvider& fdp = in.provider();
  in.set_wild(in.Chance(24));
  v1::SolveRequest request;
  const int n = skeleton.joints_size();
  const auto joint_name = [&](int j) -> std::string {
    return in.Break(16) ? in.Name(3) : skeleton.joints(j).name();
  };
  int goals = fdp.ConsumeIntegralInRange(1, max_goals);
  if (in.Break(16)) goals = in.Chance(128) ? 0 : max_goals + 3;
  const bool all_full_body = in.Chance(64);
  for (int g = 0; g < goals; ++g) {
    const uint8_t solver = fdp.ConsumeIntegral<uint8_t>();
    int solver_value = all_full_body ? v1::SOLVER_FULL_BODY : solver % 9;
    if (in.Break(16)) solver_value = std::array<int, 4>{-1, 9, 42, 1000}[g % 4];
    const bool full_body = solver_value == v1::SOLVER_FULL_BODY;

    // The goal's chain: a named one, or root_joint..tip_joint (for
    // full-body goals also tip_joint alone, the effector).
    const int tip = n - 1 - fdp.ConsumeIntegralInRange(0, n - 1);
    int root = Ancestor(skeleton, tip, fdp.ConsumeIntegralInRange(1, 6));
    if (in.Break(16)) root = fdp.ConsumeIntegralInRange(0, n - 1);
    const uint8_t reference = fdp.ConsumeIntegral<uint8_t>() % 8;
    v1::Goal goal;
    if (reference < 4 && skeleton.chains_size() > 0) {
      const int c = fdp.ConsumeIntegralInRange(0, skeleton.chains_size() - 1);
      goal.set_chain(in.Break(16) ? in.Name(2) : skeleton.chains(c).name());
    } else if (full_body && (reference == 7 || root < 0)) {
      goal.set_tip_joint(joint_name(tip));
    } else if (root >= 0) {
      goal.set_root_joint(joint_name(root));
      goal.set_tip_joint(joint_name(tip));
    } else if (!in.wild()) {
      continue;  // No chain ends at this tip.
    }
    goal.set_solver(static_cast<v1::Solver>(solver_value));

    if (!in.Break(16)) in.Vec(-3.0, 3.0, goal.mutable_target());
    if (in.Chance(48)) in.Rotation(goal.mutable_target_orientation());
    if (in.Chance(48)) in.Vec(-3.0, 3.0, goal.mutable_pole());
    if (in.Chance(40)) goal.set_weight(in.Number(0.0, 1.0));
    if (in.Break(8)) goal.set_weight(in.Number(-1.0, 2.0));

    // The options each solver takes (SolveOptions in solve.proto); a wild
    // request also sets them where they are refused.
    const bool chain_solver = !full_body;
    const bool stepped = solver_value >= v1::SOLVER_CCD &&
                         solver_value <= v1::SOLVER_GRADIENT_DESCENT;
    const bool restarts = solver_value >= v1::SOLVER_JACOBIAN_TRANSPOSE &&
                          solver_value <= v1::SOLVER_GRADIENT_DESCENT;
    v1::SolveOptions* options = goal.mutable_options();
    if (chain_solver ? !in.Chance(24) : in.Break(16)) {
      options->set_max_iterations(in.Int(1, 32));
    }
    if (in.Chance(24)) options->set_tolerance(in.Number(0.0, 0.05));
    if (in.Chance(24)) {
      options->set_orientation_tolerance_rad(in.Number(0.0, 0.1));
    }
    if (solver_value == v1::SOLVER_JACOBIAN_DLS ? in.Chance(48)
                                                : in.Break(8)) {
      options->set_damping(in.Number(0.0, 1.0));
    }
    if (stepped ? in.Chance(48) : in.Break(8)) {
      options->set_max_step_rad(in.Number(0.0, kPi));
    }
    if (restarts ? in.Chance(32) : in.Break(8)) {
      options->set_max_restarts(in.Int(0, 2));
    }
    if (chain_solver ? in.Chance(24) : in.Break(8)) {
      options->set_soft(in.Number(0.0, 0.5));
    }
    if (solver_value == v1::SOLVER_TWO_BONE ? in.Chance(48) : in.Break(8)) {
      options->set_max_stretch(in.Number(1.0, 3.0));
    }
    if (chain_solver ? in.Chance(12) : in.Break(8)) {
      options->set_time_budget_ms(in.Number(0.0, 2.0));
    }
    if (full_body ? in.Chance(32) : in.Break(8)) {
      in.Vec(-1.0, 1.0, goal.mutable_aim_axis());
    }
    if (full_body ? in.Chance(96) : in.Break(8)) goal.set_priority(in.Int(0, 3));
    *request.add_goals() = std::move(goal);
  }

  if (in.Chance(128)) {
    v1::FullBodyOptions* options = request.mutable_full_body();
    if (in.Chance(96)) {
      options->set_root_joint(joint_name(fdp.ConsumeIntegralInRange(0, n - 1)));
    }
    options->set_root_mode(static_cast<v1::RootMode>(in.Int(0, 2)));
    if (in.Chance(64)) {
      options->set_root_translation_stiffness(in.Number(0.0, 1.0));
    }
    if (!in.Chance(24)) options->set_max_iterations(in.Int(1, 16));
    if (in.Chance(16)) options->set_time_budget_ms(in.Number(0.0, 2.0));
  }
  if (in.Chance(48)) {
    v1::Pose* pose = request.mutable_start_pose();
    int rotations = n;
    if (in.Break(16)) rotations += in.Chance(128) ? 1 : -1;
    for (int j = 0; j < rotations; ++j) in.Rotation(pose->add_rotations());
    if (in.Chance(128)) in.Vec(-1.0, 1.0, pose->mutable_root_translation());
  }
  request.set_return_globals(in.Chance(64));
  request.set_latest_wins(in.Chance(32));
  if (in.Chance(128)) request.set_sequence(fdp.ConsumeIntegral<uint64_t>());
  return request;
}

}  // namespace reach::fuzz
