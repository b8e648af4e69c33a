// The `reach` binary end to end against a real server on loopback: exit
// codes, JSON output that parses, readable errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/json_util.h"
#include "importers/bvh.h"
#include "importers/gltf.h"
#include "solvers/pose.h"
#include "tests/testing/gltf_bake.h"
#include "tests/testing/service.h"
#include "tests/testing/sweep.h"
#include "tests/testing/expectations.h"

namespace reach {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::TestServer;

struct CliRun {
  int exit_code;
  std::string out;
  std::string err;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string DataPath(const std::string& name) {
  return absl::StrCat(REACH_TEST_DATA, "/", name);
}

class CliTest : public ::testing::Test {
 protected:
  // Runs `reach --addr <server> ARGS`, capturing stdout and stderr.
  CliRun Reach(const std::string& args, const std::string& addr = "") {
    const std::string out = Temp("out");
    const std::string err = Temp("err");
    const std::string command =
        absl::StrCat(REACH_CLI_BINARY, " --timeout 20 --addr ",
                     addr.empty() ? server_.address() : addr, " ", args, " >",
                     out, " 2>", err);
    const int status = std::system(command.c_str());
    CliRun run{WIFEXITED(status) ? WEXITSTATUS(status) : -1, Slurp(out),
            Slurp(err)};
    return run;
  }

  // A file name of this test alone (ctest runs tests in parallel).
  static std::string Temp(const std::string& name) {
    return absl::StrCat(::testing::TempDir(), "/reach_cli_", getpid(), "_",
                        name);
  }

  std::string RegisterWalk() {
    CliRun run = Reach("register --json " + DataPath("mocap/cmu_02_01_walk.bvh"));
    EXPECT_EQ(run.exit_code, 0) << run.err;
    v1::RegisterSkeletonResponse response;
    EXPECT_TRUE(
        google::protobuf::util::JsonStringToMessage(run.out, &response).ok())
        << run.out;
    return response.skeleton_id();
  }

  TestServer server_;
};

TEST_F(CliTest, HealthExitCodes) {
  CliRun serving = Reach("health");
  EXPECT_EQ(serving.exit_code, 0) << serving.err;
  EXPECT_EQ(serving.out, "SERVING\n");
  server_.server->SetServing(false);
  CliRun not_serving = Reach("health");
  EXPECT_EQ(not_serving.exit_code, 4);
  EXPECT_EQ(not_serving.out, "NOT_SERVING\n");
  // Nobody listens on port 1.
  CliRun down = Reach("--timeout 2 health", "127.0.0.1:1");
  EXPECT_EQ(down.exit_code, 1);
  EXPECT_THAT(down.err, HasSubstr("UNAVAILABLE"));
}

// Without --addr the tool reads $REACH_ADDRESS, as the Python client does
// (the README's tour relies on it); --addr still wins over it.
TEST_F(CliTest, AddressFromTheEnvironment) {
  const std::string out = Temp("env_out");
  const std::string from_env =
      absl::StrCat("REACH_ADDRESS=", server_.address(), " ", REACH_CLI_BINARY,
                   " --timeout 20 list --json >", out, " 2>&1");
  const int status = std::system(from_env.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << Slurp(out);
  EXPECT_EQ(Slurp(out), "{}\n");
  // Nobody listens on port 1: the flag's address is the one called.
  const std::string flag_wins =
      absl::StrCat("REACH_ADDRESS=", server_.address(), " ", REACH_CLI_BINARY,
                   " --timeout 2 --addr 127.0.0.1:1 health >", out, " 2>&1");
  const int refused = std::system(flag_wins.c_str());
  ASSERT_TRUE(WIFEXITED(refused));
  EXPECT_EQ(WEXITSTATUS(refused), 1);
  EXPECT_THAT(Slurp(out), HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(Reach("--help").out, HasSubstr("REACH_ADDRESS"));
}

// --version needs no server and no subcommand (issue 46).
TEST_F(CliTest, VersionNamesTheReleaseTheBuildAndTheCommit) {
  CliRun run = Reach("--version");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, ::testing::MatchesRegex(absl::StrCat(
                           "reach ", REACH_PROJECT_VERSION, " \\(",
                           testing::RegexLiteral(REACH_BUILD_TYPE_STRING),
                           " build(, commit [0-9a-f]{12})?\\)\n")));
  EXPECT_THAT(Reach("--help").out, HasSubstr("--version"));
}

TEST_F(CliTest, RegistryCommands) {
  const std::string id = RegisterWalk();
  ASSERT_EQ(id.size(), 64u);
  CliRun again = Reach("register " + DataPath("mocap/cmu_02_01_walk.bvh"));
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_THAT(again.out, HasSubstr("already registered " + id));

  CliRun list = Reach("list --json");
  ASSERT_EQ(list.exit_code, 0) << list.err;
  v1::ListSkeletonsResponse listed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(list.out, &listed).ok());
  ASSERT_EQ(listed.skeletons_size(), 1);
  EXPECT_EQ(listed.skeletons(0).skeleton_id(), id);
  EXPECT_EQ(listed.skeletons(0).joint_count(), 38);

  // `get` prints a skeleton file that registers to the same id.
  CliRun get = Reach("get " + id);
  ASSERT_EQ(get.exit_code, 0) << get.err;
  const std::string file = Temp("walk.skeleton.json");
  std::ofstream(file) << get.out;
  CliRun reregister = Reach("register --json " + file);
  EXPECT_EQ(reregister.exit_code, 0) << reregister.err;
  EXPECT_THAT(reregister.out, HasSubstr(id));

  CliRun del = Reach("delete " + id);
  EXPECT_EQ(del.exit_code, 0) << del.err;
  CliRun gone = Reach("get " + id);
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_THAT(gone.err, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(gone.err, HasSubstr(id));
}

TEST_F(CliTest, RegisterErrorsAreReadable) {
  CliRun missing = Reach("register /nonexistent/walk.bvh");
  EXPECT_EQ(missing.exit_code, 3);
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent/walk.bvh"));

  const std::string bad = Temp("bad.bvh");
  std::ofstream(bad) << "HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  BONE x\n";
  CliRun malformed = Reach("register " + bad);
  EXPECT_EQ(malformed.exit_code, 3);
  EXPECT_THAT(malformed.err, HasSubstr("bad.bvh:5: joint 'Hips': unknown keyword 'BONE'"));

  CliRun chain = Reach("register --chain nonsense " +
                    DataPath("mocap/cmu_02_01_walk.bvh"));
  EXPECT_EQ(chain.exit_code, 2);
  EXPECT_THAT(chain.err, HasSubstr("NAME=ROOT:TIP"));

  CliRun unknown_joint = Reach("register --chain tail=Hips:Tail " +
                            DataPath("mocap/cmu_02_01_walk.bvh"));
  EXPECT_EQ(unknown_joint.exit_code, 1);
  EXPECT_THAT(unknown_joint.err, HasSubstr("Tail"));
}

TEST_F(CliTest, RegisterOnTheServerImportsTheSameSkeleton) {
  const std::string local = RegisterWalk();
  CliRun remote = Reach("register --on-server --json " +
                        DataPath("mocap/cmu_02_01_walk.bvh"));
  ASSERT_EQ(remote.exit_code, 0) << remote.err;
  v1::ImportSkeletonResponse response;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(remote.out, &response).ok())
      << remote.out;
  EXPECT_EQ(response.skeleton_id(), local);
  EXPECT_FALSE(response.created());

  // The same chain overrides and name as a local import; errors from the
  // server's importer name the file and line (exit 1: the server refused).
  CliRun renamed = Reach("register --on-server --name renamed --chain "
                         "tail=Hips:LeftHand " +
                         DataPath("mocap/cmu_02_01_walk.bvh"));
  EXPECT_EQ(renamed.exit_code, 0) << renamed.err;
  EXPECT_THAT(renamed.out, HasSubstr("tail"));
  const std::string bad = Temp("bad_remote.bvh");
  std::ofstream(bad) << "HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  BONE x\n";
  CliRun malformed = Reach("register --on-server " + bad);
  EXPECT_EQ(malformed.exit_code, 1);
  EXPECT_THAT(malformed.err,
              HasSubstr("bad_remote.bvh:5: joint 'Hips': unknown keyword"));
}

// --rest-frame: the Character Creator clip registered with its T-pose
// frame as the rest pose, locally and on the server alike (the same id);
// its first joint's rest rotation is no longer the identity.
TEST_F(CliTest, RegisterWithARestFrame) {
  const std::string clip = DataPath("mocap/cmu_06_15_shoot_ccrig.bvh");
  CliRun printed = Reach("register --print --rest-frame 0 " + clip);
  ASSERT_EQ(printed.exit_code, 0) << printed.err;
  v1::Skeleton skeleton;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(printed.out, &skeleton).ok())
      << printed.out;
  const v1::Quat& q = skeleton.joints(0).rest().rotation();
  EXPECT_LT(std::abs(q.w()), 1.0 - 1e-6);
  CliRun local = Reach("register --json --rest-frame 0 " + clip);
  ASSERT_EQ(local.exit_code, 0) << local.err;
  CliRun remote = Reach("register --on-server --json --rest-frame 0 " + clip);
  ASSERT_EQ(remote.exit_code, 0) << remote.err;
  v1::RegisterSkeletonResponse a;
  v1::ImportSkeletonResponse b;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(local.out, &a).ok());
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(remote.out, &b).ok());
  EXPECT_EQ(a.skeleton_id(), b.skeleton_id());
  CliRun beyond = Reach("register --print --rest-frame 9999 " + clip);
  EXPECT_EQ(beyond.exit_code, 3);  // The file cannot be imported so.
  EXPECT_THAT(beyond.err, HasSubstr("rest_frame 9999"));
  CliRun negative = Reach("register --print --rest-frame -1 " + clip);
  EXPECT_EQ(negative.exit_code, 2);
}

TEST_F(CliTest, UsageErrorsExitTwo) {
  EXPECT_EQ(Reach("").exit_code, 2);
  EXPECT_EQ(Reach("frobnicate").exit_code, 2);
  EXPECT_EQ(Reach("solve --chain x --target 1,2,3").exit_code, 2);
  CliRun bad_vector = Reach("solve --skeleton s --chain c --target 1,2");
  EXPECT_EQ(bad_vector.exit_code, 2);
  EXPECT_THAT(bad_vector.err, HasSubstr("--target"));
  CliRun bad_solver = Reach("solve --skeleton s --chain c --target 1,2,3 --solver magic");
  EXPECT_EQ(bad_solver.exit_code, 2);
  EXPECT_THAT(bad_solver.err, HasSubstr("fabrik"));
  // --resume and --no-resume contradict each other.
  CliRun both = Reach("--resume --no-resume health");
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.err, HasSubstr("--no-resume"));
  CliRun help = Reach("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("Exit codes"));
  EXPECT_THAT(help.out, HasSubstr("--resume"));
  for (const char* command :
       {"register", "list", "get", "delete", "solve", "stream", "bench",
        "health", "characterize"}) {
    CliRun sub = Reach(absl::StrCat(command, " --help"));
    EXPECT_EQ(sub.exit_code, 0) << command;
    EXPECT_THAT(sub.out, HasSubstr(command)) << command;
  }
}

// `characterize` runs locally: the Boxing rig's roles, its ambiguous
// LeftShoulder placed as the upper arm; overrides; errors' exit codes.
TEST_F(CliTest, CharacterizePrintsTheRoles) {
  CliRun boxing = Reach("characterize " + DataPath("rigs/Boxing_Toes.bvh"));
  EXPECT_EQ(boxing.exit_code, 0) << boxing.err;
  EXPECT_THAT(boxing.out,
              HasSubstr("left.upper_arm = LeftShoulder (name, placed by its "
                        "neighbours)"));
  EXPECT_THAT(boxing.out, HasSubstr("left.clavicle = LeftCollar (name)"));
  EXPECT_THAT(boxing.out, HasSubstr("sides from names"));
  EXPECT_THAT(boxing.out, HasSubstr("unmapped (5): Head_End"));
  CliRun overridden =
      Reach("characterize --override right.hand=RightElbow " +
            DataPath("rigs/Boxing_Toes.bvh"));
  EXPECT_EQ(overridden.exit_code, 0) << overridden.err;
  EXPECT_THAT(overridden.out, HasSubstr("right.hand = RightElbow (override)"));
  EXPECT_THAT(overridden.out, Not(HasSubstr("right.forearm")));
  CliRun cc = Reach("characterize --frame 1 " +
                    DataPath("mocap/cmu_06_15_shoot_ccrig.bvh"));
  EXPECT_EQ(cc.exit_code, 0) << cc.err;
  EXPECT_THAT(cc.out, HasSubstr("head = CC_Base_Head (name)"));
  CliRun bad_override = Reach("characterize --override left.hand " +
                              DataPath("rigs/Boxing_Toes.bvh"));
  EXPECT_EQ(bad_override.exit_code, 2);
  EXPECT_THAT(bad_override.err, HasSubstr("--override: expected ROLE=JOINT"));
  CliRun bad_role = Reach("characterize --override elbow=LeftElbow " +
                          DataPath("rigs/Boxing_Toes.bvh"));
  EXPECT_EQ(bad_role.exit_code, 2);
  EXPECT_THAT(bad_role.err, HasSubstr("overrides[0].role"));
  CliRun not_humanoid = Reach("characterize " + DataPath("urdf/panda.urdf"));
  EXPECT_EQ(not_humanoid.exit_code, 3);
  EXPECT_THAT(not_humanoid.err, HasSubstr("not a humanoid"));
  CliRun frame_of_json = Reach(
      "characterize --frame 0 " + DataPath("../../examples/humanoid.skeleton.json"));
  EXPECT_EQ(frame_of_json.exit_code, 2);
  EXPECT_THAT(frame_of_json.err, HasSubstr("--frame"));
  CliRun missing = Reach("characterize /nonexistent.bvh");
  EXPECT_EQ(missing.exit_code, 3);
}

TEST_F(CliTest, SolveJsonLandsOnTheTarget) {
  const std::string id = RegisterWalk();
  // The rest pose has the hips at the origin and the left shoulder
  // (LeftArm) near (3.6, 5.0, -0.4): a target 3.6 units away, elbow back.
  CliRun solve = Reach("solve --json --skeleton " + id +
                    " --chain left_arm --target 5,3,3 --pole 4,2,-3 "
                    "--solver two_bone");
  ASSERT_EQ(solve.exit_code, 0) << solve.err;
  v1::SolveResponse response;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(solve.out, &response).ok())
      << solve.out;
  ASSERT_EQ(response.results_size(), 1);
  EXPECT_TRUE(response.results(0).reached());
  EXPECT_GT(response.rotated_joints_size(), 0);

  CliRun text = Reach("solve --skeleton " + id +
                   " --chain left_arm --target 5,3,3");
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("chain left_arm: reached"));

  // The Panda from its all-zero pose (straight up, a singularity where DLS
  // alone stalls): restarts from random configurations get there.
  CliRun panda = Reach("register --json " + DataPath("urdf/panda.urdf"));
  ASSERT_EQ(panda.exit_code, 0) << panda.err;
  v1::RegisterSkeletonResponse panda_id;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(panda.out, &panda_id).ok());
  const std::string arm = " --skeleton " + panda_id.skeleton_id() +
                          " --chain panda_hand_joint --target 0.4,0.2,0.5"
                          " --solver jacobian_dls";
  CliRun restarted = Reach("solve --max-restarts 8" + arm);
  EXPECT_EQ(restarted.exit_code, 0) << restarted.err;
  EXPECT_THAT(restarted.out, HasSubstr("chain panda_hand_joint: reached"));

  // --angles: every hinge the solve moved, in radians and degrees, with its
  // limits; the JSON carries the same angles.
  CliRun angles = Reach("solve --angles --max-restarts 8" + arm);
  EXPECT_EQ(angles.exit_code, 0) << angles.err;
  EXPECT_THAT(angles.out, HasSubstr("panda_joint4"));
  EXPECT_THAT(angles.out, HasSubstr(" rad ("));
  EXPECT_THAT(angles.out, HasSubstr("limits [-3.0718, -0.0698]"));
  // A time budget instead of a restart count gets there too.
  CliRun budgeted = Reach("solve --time-budget-ms 20000" + arm);
  EXPECT_EQ(budgeted.exit_code, 0) << budgeted.err;
  EXPECT_THAT(budgeted.out, HasSubstr("chain panda_hand_joint: reached"));
  EXPECT_EQ(Reach("solve --time-budget-ms -1" + arm).exit_code, 2);
  CliRun json = Reach("solve --json --angles --max-restarts 8" + arm);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  v1::SolveResponse with_angles;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(json.out, &with_angles).ok())
      << json.out;
  EXPECT_THAT(json.out, HasSubstr("\"hingeAnglesRad\""));
  ASSERT_GE(with_angles.hinge_joints_size(), 6);
  ASSERT_EQ(with_angles.hinge_angles_rad_size(),
            with_angles.hinge_joints_size());
  // The same solve: the text printed these angles (to 1e-9).
  for (double a : with_angles.hinge_angles_rad()) {
    char printed[32];
    std::snprintf(printed, sizeof(printed), "angle %+.9f rad", a);
    EXPECT_THAT(angles.out, HasSubstr(printed));
  }

  CliRun unknown = Reach("solve --skeleton " + id + " --chain tail --target 1,2,3");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("goals[0].chain"));
}

TEST_F(CliTest, SolveRequestFilePrintsEveryGoal) {
  const std::string humanoid = DataPath("../../examples/humanoid.skeleton.json");
  const std::string request = DataPath("../../examples/full_body.request.json");
  CliRun registered = Reach("register --json " + humanoid);
  ASSERT_EQ(registered.exit_code, 0) << registered.err;
  v1::RegisterSkeletonResponse id;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(registered.out, &id).ok());

  // The example request: feet, hands and a head look-at, full-body; its
  // skeletonId comes from --skeleton.
  CliRun text = Reach("solve --request " + request + " --skeleton " +
                      id.skeleton_id());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  CliRun json = Reach("solve --json --request " + request + " --skeleton " +
                      id.skeleton_id());
  ASSERT_EQ(json.exit_code, 0) << json.err;
  v1::SolveResponse response;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(json.out, &response).ok())
      << json.out;
  ASSERT_EQ(response.results_size(), 5);
  // One line per goal, in order, with the numbers of the same
  // (deterministic) solve.
  const char* labels[] = {"goal 0 (chain l_leg)", "goal 1 (chain r_leg)",
                          "goal 2 (chain l_arm, priority 1)",
                          "goal 3 (chain r_arm, priority 1)",
                          "goal 4 (joint head, look-at, priority 2)"};
  size_t at = 0;
  for (int i = 0; i < 5; ++i) {
    const v1::GoalResult& r = response.results(i);
    EXPECT_EQ(r.solver(), v1::SOLVER_FULL_BODY);
    char line[256];
    std::snprintf(line, sizeof(line),
                  "%s: %s, position error %.3g, orientation error %.3g rad, "
                  "%d iterations, full_body\n",
                  labels[i], r.reached() ? "reached" : "NOT reached",
                  r.position_error(), r.orientation_error_rad(),
                  r.iterations());
    const size_t found = text.out.find(line, at);
    ASSERT_NE(found, std::string::npos) << line << "\n" << text.out;
    at = found;
  }
  EXPECT_THAT(text.out, HasSubstr("5 of 5 goals reached"));
  EXPECT_THAT(text.out, HasSubstr("hips                     translation"));

  // From stdin, naming the skeleton inside the request.
  v1::SolveRequest with_id;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(Slurp(request),
                                                          &with_id)
                  .ok());
  with_id.set_skeleton_id(id.skeleton_id());
  std::string body;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(with_id, &body).ok());
  const std::string file = Temp("request.json");
  std::ofstream(file) << body;
  CliRun piped = Reach("solve --request - < " + file);
  EXPECT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_THAT(piped.out, HasSubstr("goal 4 (joint head, look-at, priority 2)"));

  // The server's errors name the field; the file's name its file.
  with_id.mutable_goals(2)->set_priority(99);
  body.clear();  // MessageToJsonString appends.
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(with_id, &body).ok());
  std::ofstream(file) << body;
  CliRun refused = Reach("solve --request " + file);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(refused.err, HasSubstr("goals[2].priority"));
  CliRun missing = Reach("solve --request /nonexistent/request.json");
  EXPECT_EQ(missing.exit_code, 3);
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent/request.json"));
  std::ofstream(file) << "{\"goals\": [{\"chain\": 3";
  CliRun malformed = Reach("solve --request " + file);
  EXPECT_EQ(malformed.exit_code, 3);
  EXPECT_THAT(malformed.err, HasSubstr(file));
  // A file without skeletonId needs --skeleton; it excludes one goal's
  // flags.
  CliRun no_skeleton = Reach("solve --request " + request);
  EXPECT_EQ(no_skeleton.exit_code, 2);
  EXPECT_THAT(no_skeleton.err, HasSubstr("--skeleton"));
  EXPECT_EQ(Reach("solve --request " + request + " --skeleton " +
                  id.skeleton_id() + " --chain l_leg")
                .exit_code,
            2);
}

TEST_F(CliTest, StreamReportsAndWritesBvh) {
  const std::string out = Temp("solved.bvh");
  CliRun stream = Reach("stream --json --max-rate --frames 120 --out " + out +
                     " " + DataPath("mocap/cmu_131_03_hop.bvh"));
  ASSERT_EQ(stream.exit_code, 0) << stream.err;
  const nlohmann::json report = nlohmann::json::parse(stream.out);
  EXPECT_EQ(report["frames"], 120);
  EXPECT_EQ(report["solved"], 120);
  EXPECT_EQ(report["errors"], 0);
  EXPECT_LT(report["meanErrorOfHeight"].get<double>(), 1e-4);
  EXPECT_GT(report["fps"].get<double>(), 0);
  EXPECT_EQ(report["chains"].size(), 4u);
  CliRun reimport = Reach("register --print " + out);
  EXPECT_EQ(reimport.exit_code, 0) << reimport.err;

  CliRun text = Reach("stream --frames 10 --fps 240 " +
                   DataPath("mocap/cmu_02_01_walk.bvh"));
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("10 solved, 0 skipped, 0 errors"));

  CliRun bad_chain = Reach("stream --chains left_arm,tail " +
                        DataPath("mocap/cmu_02_01_walk.bvh"));
  EXPECT_EQ(bad_chain.exit_code, 2);
  EXPECT_THAT(bad_chain.err, HasSubstr("chain 'tail'"));
}

// The extent of the joints along each model axis, by the test's own
// forward kinematics.
Eigen::Vector3d Extent(const Skeleton& skeleton, const Pose& pose) {
  const testing::IndependentGlobals g = testing::IndependentFk(skeleton, pose);
  Eigen::Vector3d lo = g.position[0], hi = g.position[0];
  for (const Eigen::Vector3d& p : g.position) {
    lo = lo.cwiseMin(p);
    hi = hi.cwiseMax(p);
  }
  return hi - lo;
}

// A CMU walk onto Khronos' RiggedFigure (other names, a -90 degree root, a
// third of the size) through the server: the written BVH stands on every
// frame. (Copying rotations by joint name, as the client once did, laid it
// on its back: height 1.17 -> 0.31.)
TEST_F(CliTest, RetargetWritesAnUprightClipOntoAnotherRig) {
  const std::string out = Temp("retargeted.bvh");
  CliRun run = Reach("retarget --json --report --first 1 --out " + out + " " +
                     DataPath("mocap/cmu_02_01_walk.bvh") + " --to " +
                     DataPath("gltf/RiggedFigure.glb"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json report = nlohmann::json::parse(run.out);
  EXPECT_EQ(report["frames"], 343);
  EXPECT_EQ(report["unreachedGoals"], 0);
  ASSERT_EQ(report["quality"].size(), 1u);
  const nlohmann::json& quality = report["quality"][0];
  EXPECT_EQ(quality["mappedJoints"], 19);
  EXPECT_FALSE(quality.contains("unmovedJoints")) << quality;
  EXPECT_LT(quality["hipsRatioWorst"].get<double>(), 0.05);
  EXPECT_GT(quality["contacts"].get<int>(), 0);

  absl::StatusOr<import::BvhClip> clip = import::ImportBvh(out);
  ASSERT_TRUE(clip.ok()) << clip.status();
  EXPECT_EQ(clip->num_frames, 343);
  absl::StatusOr<Skeleton> skeleton = Skeleton::Create(clip->skeleton.def);
  ASSERT_TRUE(skeleton.ok());
  // The figure's 19 joints and the BVH's end sites.
  EXPECT_GE(skeleton->num_joints(), 19);
  const Eigen::Vector3d rest = Extent(*skeleton, RestPose(*skeleton));
  int up = 0;
  rest.maxCoeff(&up);
  Pose pose;
  double lowest = INFINITY;
  for (int f = 0; f < clip->num_frames; ++f) {
    clip->FramePose(f, &pose);
    lowest = std::min(lowest, Extent(*skeleton, pose)[up] / rest[up]);
  }
  EXPECT_GT(lowest, 0.85);

  // Live, at the clip's rate, onto the humanoid example (its chains are
  // named l_leg...: once refused as sharing no chain).
  CliRun live = Reach("retarget --live --max-rate --report --frames 60 " +
                      DataPath("mocap/cmu_02_01_walk.bvh") + " --to " +
                      std::string(REACH_EXAMPLES_DIR) +
                      "/humanoid.skeleton.json");
  ASSERT_EQ(live.exit_code, 0) << live.err;
  EXPECT_THAT(live.out, HasSubstr("retargeted 60 frames live"));
  EXPECT_THAT(live.out, HasSubstr("live answers equal to the batch's: yes"));

  // Errors name the flag or the file.
  CliRun bad_limb = Reach("retarget --no-ik left_tail " +
                          DataPath("mocap/cmu_02_01_walk.bvh") + " --to " +
                          DataPath("gltf/RiggedFigure.glb"));
  EXPECT_EQ(bad_limb.exit_code, 2);
  EXPECT_THAT(bad_limb.err, HasSubstr("--no-ik: \"left_tail\""));
  CliRun bad_frame = Reach("retarget --source-frame 100000 " +
                           DataPath("mocap/cmu_02_01_walk.bvh") + " --to " +
                           DataPath("gltf/RiggedFigure.glb"));
  EXPECT_EQ(bad_frame.exit_code, 2);
  EXPECT_THAT(bad_frame.err, HasSubstr("--source-frame 100000"));
  CliRun bad_override = Reach("retarget --target-override left.hand=Nope " +
                              DataPath("mocap/cmu_02_01_walk.bvh") + " --to " +
                              DataPath("gltf/RiggedFigure.glb"));
  EXPECT_EQ(bad_override.exit_code, 1) << bad_override.err;
  EXPECT_THAT(bad_override.err, HasSubstr("spec.target.overrides[0].joint"));
  CliRun missing = Reach("retarget " + DataPath("mocap/nope.bvh") + " --to " +
                         DataPath("gltf/RiggedFigure.glb"));
  EXPECT_EQ(missing.exit_code, 3) << missing.err;
  EXPECT_THAT(missing.err, HasSubstr("nope.bvh"));
}

// `--out OUT.glb` with a .glb target: the motion goes into a copy of the
// target's own file. Read back through the project's importer (each key
// baked into its nodes, the file imported again), every frame is the BVH
// output's pose of the same retarget, joint by joint; and three.js'
// GLTFLoader and AnimationMixer (under Node, viewer/node_modules) put every
// bone where the C++ side's forward kinematics of the BVH frames does, and
// Khronos' glTF validator finds nothing in the copy that it does not find
// in the target file.
TEST_F(CliTest, RetargetWritesTheMotionIntoTheTargetsGlb) {
  for (const char* rig : {"rigs/BCN_Epileptic.glb", "gltf/RiggedFigure.glb"}) {
    SCOPED_TRACE(rig);
    const std::string target_file = DataPath(rig);
    const std::string glb = Temp("retargeted.glb");
    const std::string bvh = Temp("retargeted.bvh");
    for (const std::string& out : {glb, bvh}) {
      CliRun run = Reach("retarget --quiet --first 1 --out " + out + " " +
                         DataPath("mocap/cmu_02_01_walk.bvh") + " --to " +
                         target_file);
      ASSERT_EQ(run.exit_code, 0) << run.err;
      EXPECT_THAT(run.out, HasSubstr("wrote " + out + " (343 frames)"));
    }
    const std::string written = Slurp(glb);
    std::string name;
    absl::StatusOr<int> keys = testing::GlbAnimationKeys(written, -1, &name);
    ASSERT_TRUE(keys.ok()) << keys.status();
    EXPECT_EQ(*keys, 343);
    EXPECT_EQ(name, "cmu_02_01_walk");

    absl::StatusOr<import::BvhClip> clip = import::ImportBvh(bvh);
    ASSERT_TRUE(clip.ok()) << clip.status();
    ASSERT_EQ(clip->num_frames, 343);
    absl::StatusOr<Skeleton> bvh_skeleton = Skeleton::Create(clip->skeleton.def);
    ASSERT_TRUE(bvh_skeleton.ok());
    // The target as the importer reads it (scales and all), and its nodes.
    import::GltfJointNodes nodes;
    absl::StatusOr<import::ImportedSkeleton> imported =
        import::ImportGltf(target_file, 0, import::ImportLimits(), &nodes);
    ASSERT_TRUE(imported.ok()) << imported.status();
    absl::StatusOr<Skeleton> target = Skeleton::Create(imported->def);
    ASSERT_TRUE(target.ok());
    const testing::IndependentGlobals rest =
        testing::IndependentFk(*target, RestPose(*target));
    Eigen::Vector3d lo = rest.position[0], hi = rest.position[0];
    for (const Eigen::Vector3d& p : rest.position) {
      lo = lo.cwiseMin(p);
      hi = hi.cwiseMax(p);
    }
    const double height = (hi - lo).maxCoeff();

    // The BVH's frame on the target: its joints' rotations, its root's
    // translation.
    std::vector<int> bvh_joint(target->num_joints());
    for (int j = 0; j < target->num_joints(); ++j) {
      bvh_joint[j] = bvh_skeleton->FindJoint(target->joint(j).name);
      ASSERT_GE(bvh_joint[j], 0) << target->joint(j).name;
    }
    const auto bvh_pose = [&](int f) {
      Pose frame;
      clip->FramePose(f, &frame);
      Pose pose = RestPose(*target);
      for (int j = 0; j < target->num_joints(); ++j) {
        pose.local[j].rotation = frame.local[bvh_joint[j]].rotation;
        if (target->joint(j).parent < 0) {
          pose.local[j].translation = frame.local[bvh_joint[j]].translation;
        }
      }
      return pose;
    };

    double worst_angle = 0, worst_root = 0, worst_position = 0;
    for (int f = 0; f < 343; ++f) {
      absl::StatusOr<std::string> baked =
          testing::BakeGlbAnimationKey(written, -1, f);
      ASSERT_TRUE(baked.ok()) << baked.status();
      absl::StatusOr<import::ImportedSkeleton> back =
          import::ParseGltf(*baked, "baked.glb");
      ASSERT_TRUE(back.ok()) << back.status();
      absl::StatusOr<Skeleton> read = Skeleton::Create(back->def);
      ASSERT_TRUE(read.ok());
      const Pose want = bvh_pose(f);
      const testing::IndependentGlobals from_bvh =
          testing::IndependentFk(*target, want);
      const testing::IndependentGlobals from_glb =
          testing::IndependentFk(*read, RestPose(*read));
      ASSERT_EQ(read->num_joints(), target->num_joints());
      for (int j = 0; j < target->num_joints(); ++j) {
        const int k = read->FindJoint(target->joint(j).name);
        ASSERT_GE(k, 0);
        worst_angle = std::max(worst_angle,
                               AngleBetween(read->joint(k).rest.rotation,
                                            want.local[j].rotation));
        if (target->joint(j).parent < 0) {
          worst_root = std::max(worst_root,
                                (read->joint(k).rest.translation -
                                 want.local[j].translation).norm() / height);
        }
        worst_position = std::max(
            worst_position,
            (from_glb.position[k] - from_bvh.position[j]).norm() / height);
      }
    }
    EXPECT_LT(worst_angle, 1e-5);
    EXPECT_LT(worst_root, 1e-5);
    EXPECT_LT(worst_position, 1e-5);
    std::printf("%s: GLB read back against the BVH over 343 frames: local "
                "rotations within %.3g rad, root translation %.3g and joint "
                "positions %.3g of the height (%.4g)\n",
                rig, worst_angle, worst_root, worst_position, height);

    // three.js: the bones' world positions at a few frames.
    nlohmann::json expected = {{"animation", "cmu_02_01_walk"},
                               {"frameTime", clip->frame_time},
                               {"height", height},
                               {"frames", nlohmann::json::array()}};
    // Keys, and halfway between two (LINEAR: rotations slerped in the
    // node's frame, which is the joint's turned by a fixed rotation, so
    // slerping the joint's is the same; root translations lerped).
    const auto halfway = [&](int f) {
      const Pose a = bvh_pose(f), b = bvh_pose(f + 1);
      Pose pose = a;
      for (int j = 0; j < target->num_joints(); ++j) {
        pose.local[j].rotation =
            a.local[j].rotation.slerp(0.5, b.local[j].rotation);
        pose.local[j].translation =
            0.5 * (a.local[j].translation + b.local[j].translation);
      }
      return pose;
    };
    for (const auto& [f, fraction] :
         std::vector<std::pair<int, double>>{{0, 0},
                                             {1, 0},
                                             {57, 0},
                                             {171, 0},
                                             {171, 0.5},
                                             {300, 0.5},
                                             {342, 0}}) {
      const testing::IndependentGlobals g = testing::IndependentFk(
          *target, fraction == 0 ? bvh_pose(f) : halfway(f));
      nlohmann::json joints = nlohmann::json::array();
      for (int j = 0; j < target->num_joints(); ++j) {
        joints.push_back({{"node", nodes.node[j]},
                          {"name", target->joint(j).name},
                          {"position",
                           {g.position[j].x(), g.position[j].y(),
                            g.position[j].z()}}});
      }
      expected["frames"].push_back(
          {{"frame", f}, {"fraction", fraction}, {"joints", joints}});
    }
    const std::string expected_file = Temp("expected.json");
    std::ofstream(expected_file) << expected.dump();
    const std::string log = Temp("three.log");
    const std::string command = absl::StrCat(
        "node ", REACH_SOURCE_DIR, "/viewer/test/gltf_animation_check.mjs",
        " --glb ", glb, " --expected ", expected_file, " --original ",
        target_file, " >", log, " 2>&1");
    const int status = std::system(command.c_str());
    const std::string three = Slurp(log);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << three;
    EXPECT_THAT(three, HasSubstr("worst")) << three;
    std::printf("%s", three.c_str());
    for (const std::string& file : {glb, bvh, expected_file, log}) {
      std::remove(file.c_str());
    }
  }

  // Errors name the flag: a .glb out of a target that is not one, a .gltf
  // out, a place that cannot be written.
  const std::string walk = DataPath("mocap/cmu_02_01_walk.bvh");
  CliRun not_glb = Reach("retarget --out " + Temp("x.glb") + " " + walk +
                         " --to " + std::string(REACH_EXAMPLES_DIR) +
                         "/humanoid.skeleton.json");
  EXPECT_EQ(not_glb.exit_code, 2) << not_glb.err;
  EXPECT_THAT(not_glb.err, HasSubstr("--out " + Temp("x.glb")));
  EXPECT_THAT(not_glb.err, HasSubstr("--to "));
  EXPECT_THAT(not_glb.err, HasSubstr("humanoid.skeleton.json is not one"));
  CliRun gltf = Reach("retarget --out " + Temp("x.gltf") + " " + walk +
                      " --to " + DataPath("gltf/RiggedFigure.glb"));
  EXPECT_EQ(gltf.exit_code, 2) << gltf.err;
  EXPECT_THAT(gltf.err, HasSubstr("name it .glb"));
  for (const std::string& out :
       {std::string("/nonexistent-dir/walk.glb"), ::testing::TempDir()}) {
    CliRun unwritable = Reach("retarget --out " + out + " " + walk + " --to " +
                              DataPath("gltf/RiggedFigure.glb"));
    EXPECT_EQ(unwritable.exit_code, 3) << unwritable.err;
    EXPECT_THAT(unwritable.err, HasSubstr("--out " + out + ": "));
  }
  EXPECT_THAT(Reach("retarget --out /nonexistent-dir/walk.glb " + walk +
                    " --to " + DataPath("gltf/RiggedFigure.glb"))
                  .err,
              HasSubstr("cannot write in /nonexistent-dir"));
}

TEST_F(CliTest, BenchJsonCountsEveryRequest) {
  for (const char* rpc : {"solve", "batch", "stream"}) {
    SCOPED_TRACE(rpc);
    CliRun bench = Reach(absl::StrCat("bench --format json --rpc ", rpc,
                                   " --requests 60 --concurrency 3 "
                                   "--batch-size 5"));
    ASSERT_EQ(bench.exit_code, 0) << bench.err << bench.out;
    const nlohmann::json report = nlohmann::json::parse(bench.out);
    EXPECT_EQ(report["count"], 60);
    EXPECT_EQ(report["statusCodes"]["OK"], 60);
    EXPECT_EQ(report["histogram"].size(), 10u);
    const auto& latency = report["latencyMs"];
    EXPECT_LE(latency["min"].get<double>(), latency["p50"].get<double>());
    EXPECT_LE(latency["p50"].get<double>(), latency["p99"].get<double>());
    EXPECT_LE(latency["p99"].get<double>(), latency["max"].get<double>());
  }
  CliRun text = Reach("bench --rpc solve --requests 20 --rps 200");
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("Requests/s"));
  EXPECT_THAT(text.out, HasSubstr("OK: 20"));
  CliRun bad = Reach("bench --rpc nope --requests 1");
  EXPECT_EQ(bad.exit_code, 2);
}

TEST_F(CliTest, BenchFullBodySendsWholeBodyFrames) {
  const std::string humanoid =
      DataPath("../../examples/humanoid.skeleton.json");
  for (const char* rpc : {"solve", "batch", "stream"}) {
    SCOPED_TRACE(rpc);
    CliRun bench = Reach(absl::StrCat(
        "bench --full-body --skeleton-file ", humanoid,
        " --format json --rpc ", rpc,
        " --requests 24 --concurrency 2 --batch-size 3"));
    ASSERT_EQ(bench.exit_code, 0) << bench.err << bench.out;
    const nlohmann::json report = nlohmann::json::parse(bench.out);
    EXPECT_EQ(report["fullBody"], true);
    EXPECT_EQ(report["count"], 24);
    EXPECT_EQ(report["statusCodes"]["OK"], 24);
    // Five goals a frame: feet, hands, head.
    const int frames = std::string(rpc) == "batch" ? 24 * 3 : 24;
    EXPECT_EQ(report["goals"], 5 * frames);
    EXPECT_EQ(report["goalsReached"], report["goals"]);
    EXPECT_GT(report["meanIterations"].get<double>(), 0.0);
    // Frames per second: requests per second, times the characters of a
    // batch.
    EXPECT_NEAR(report["framesPerSecond"].get<double>(),
                report["rps"].get<double>() *
                    (std::string(rpc) == "batch" ? 3 : 1),
                0.05);  // Both printed to 0.01.
  }
  // The humanoid of the file was registered for them, and deleted after.
  CliRun list = Reach("list --json");
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_THAT(list.out, Not(HasSubstr("jointCount")));

  // Without --skeleton-file: an example humanoid from the source tree
  // (found from the binary's place, whatever the working directory).
  CliRun text = Reach("bench --full-body --rpc stream --requests 10");
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("full-body frames of "));
  EXPECT_THAT(text.out, HasSubstr("examples/humanoid"));
  EXPECT_THAT(text.out, HasSubstr("Goals:        50, "));
  EXPECT_THAT(text.out, HasSubstr("Frames/s:     "));
  EXPECT_THAT(text.out, HasSubstr("OK: 10"));

  CliRun missing = Reach("bench --full-body --skeleton-file /nonexistent.json "
                         "--requests 1");
  EXPECT_EQ(missing.exit_code, 3);
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent.json"));
  EXPECT_EQ(Reach("bench --full-body --skeleton x --requests 1").exit_code, 2);
  EXPECT_EQ(Reach("bench --skeleton-file x.json --requests 1").exit_code, 2);
}

// Issue 46: the default run's goals are reachable from the pose the server
// solves them from (its rest pose), so all but the odd one are reached; and
// the rig it registered is gone afterwards.
TEST_F(CliTest, BenchGoalsAreReachedAndItsRigIsDeleted) {
  for (const char* rpc : {"solve", "batch", "stream"}) {
    SCOPED_TRACE(rpc);
    CliRun bench = Reach(absl::StrCat("bench --format json --rpc ", rpc,
                                      " --requests 200 --concurrency 2 "
                                      "--batch-size 10"));
    ASSERT_EQ(bench.exit_code, 0) << bench.err << bench.out;
    const nlohmann::json report = nlohmann::json::parse(bench.out);
    const double goals = report["goals"].get<double>();
    ASSERT_GE(goals, 4 * 200);
    EXPECT_GE(report["goalsReached"].get<double>() / goals, 0.99) << report;
    CliRun list = Reach("list --json");
    ASSERT_EQ(list.exit_code, 0) << list.err;
    EXPECT_THAT(list.out, Not(HasSubstr("reach-bench-rig")));
    EXPECT_THAT(list.out, Not(HasSubstr("skeletonId")));
  }
  // A skeleton the user names is theirs: solved against, not deleted.
  CliRun registered = Reach("register --json " +
                            DataPath("../../examples/humanoid.skeleton.json"));
  ASSERT_EQ(registered.exit_code, 0) << registered.err;
  v1::RegisterSkeletonResponse id;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(registered.out, &id).ok());
  CliRun named = Reach("bench --format json --requests 100 --skeleton " +
                       id.skeleton_id());
  ASSERT_EQ(named.exit_code, 0) << named.err;
  const nlohmann::json report = nlohmann::json::parse(named.out);
  EXPECT_GE(report["goalsReached"].get<double>() /
                report["goals"].get<double>(),
            0.99)
      << report;
  EXPECT_EQ(Reach("get " + id.skeleton_id()).exit_code, 0);
}

// Issue 46: a goal left unreached is exit 6, with or without --json; the
// answer is printed all the same.
TEST_F(CliTest, SolveExitsSixWhenAGoalIsNotReached) {
  const std::string id = RegisterWalk();
  CliRun far = Reach("solve --skeleton " + id +
                     " --chain left_arm --target 500,500,500");
  EXPECT_EQ(far.exit_code, 6) << far.err;
  EXPECT_THAT(far.out, HasSubstr("chain left_arm: NOT reached"));
  CliRun json = Reach("solve --json --skeleton " + id +
                      " --chain left_arm --target 500,500,500");
  EXPECT_EQ(json.exit_code, 6) << json.err;
  v1::SolveResponse response;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(json.out, &response).ok())
      << json.out;
  ASSERT_EQ(response.results_size(), 1);
  EXPECT_FALSE(response.results(0).reached());
  EXPECT_EQ(Reach("solve --skeleton " + id +
                  " --chain left_arm --target 5,3,3")
                .exit_code,
            0);
  EXPECT_THAT(Reach("--help").out, HasSubstr("6  solve"));
}

// Issue 46: an unknown chain is refused naming the field and listing the
// skeleton's chains (the server's message).
TEST_F(CliTest, AnUnknownChainIsRefusedListingTheChains) {
  const std::string id = RegisterWalk();
  CliRun unknown =
      Reach("solve --skeleton " + id + " --chain tail --target 1,2,3");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err,
              HasSubstr("goals[0].chain: no chain \"tail\"; chains: "
                        "left_arm, right_arm, left_leg, right_leg"));
}

// Issue 46: a non-finite number written as Python's json writes it (bare
// NaN, not JSON) gets the server's message naming its field, not protobuf
// JSON's "Couldn't parse NaN".
TEST_F(CliTest, ABareNanInARequestFileNamesItsField) {
  const std::string id = RegisterWalk();
  const std::string file = Temp("nan.request.json");
  std::ofstream(file) << "{\"skeletonId\": \"" << id
                      << "\", \"goals\": [{\"chain\": \"left_arm\", "
                         "\"target\": {\"x\": NaN, \"y\": 1.0, \"z\": "
                         "-Infinity}}]}";
  CliRun nan = Reach("solve --request " + file);
  EXPECT_EQ(nan.exit_code, 1) << nan.err;
  EXPECT_THAT(nan.err, HasSubstr("goals[0].target = (nan, 1, -inf) is not "
                                 "finite"));
  EXPECT_THAT(nan.err, Not(HasSubstr("Couldn't parse")));
}

// Issue 46: a bad number is named in a line, not with CLI11's range of
// 309-digit bounds; "nan" is no number.
TEST_F(CliTest, NumberFlagsAreCheckedWithShortMessages) {
  const std::string clip = DataPath("mocap/cmu_02_01_walk.bvh");
  for (const std::string& args : std::vector<std::string>{
           "stream --fps 0 " + clip, "stream --fps -3 " + clip,
        "stream --fps nan " + clip, "retarget --fps 0 " + clip + " --to x",
        std::string("bench --duration 0"), "bench --rps inf",
        "--timeout 0 health", "--resume-within 0 health",
        "stream --first -1 " + clip, std::string("vmc --to x --scale 0"),
        std::string("vmc --to x --duration -1")}) {
    SCOPED_TRACE(args);
    CliRun run = Reach(args);
    EXPECT_EQ(run.exit_code, 2);
    EXPECT_LT(run.err.size(), 300u) << run.err;
    EXPECT_THAT(run.err, HasSubstr("got '"));
    EXPECT_THAT(run.err, Not(HasSubstr("000000000000")));
  }
  EXPECT_THAT(Reach("stream --fps 0 " + clip).err,
              HasSubstr("--fps: must be > 0, got '0'"));
}

// Issue 46: `stream` handed a glTF binary says what it is, in printable
// text (it once echoed the file's first bytes, control characters and all).
TEST_F(CliTest, StreamRefusesANonBvhFileReadably) {
  CliRun glb = Reach("stream " + DataPath("gltf/RiggedFigure.glb"));
  EXPECT_EQ(glb.exit_code, 3);
  EXPECT_THAT(glb.err, HasSubstr("RiggedFigure.glb:1: the file: not BVH: it "
                                 "starts like a binary glTF (.glb)"));
  for (char c : glb.err) {
    EXPECT_TRUE(static_cast<unsigned char>(c) >= 0x20 || c == '\n')
        << "control byte " << static_cast<int>(c) << " in " << glb.err;
  }
  const std::string file = Temp("binary.bvh");
  std::ofstream(file, std::ios::binary)
      << std::string("\x01\x02\x1b[31m", 7) << std::string(500, 'z');
  CliRun binary = Reach("stream " + file);
  EXPECT_EQ(binary.exit_code, 3);
  EXPECT_THAT(binary.err, HasSubstr(":1: the file: not BVH: it starts like "
                                    "binary data"));
  // A token the parser quotes is cut short, its bytes that are not
  // printable UTF-8 replaced.
  std::ofstream(file, std::ios::binary)
      << "HIERARCHX\xff\xfe" << std::string(100, 'z') << "\x1b[31m"
      << std::string(500, 'z');
  binary = Reach("stream " + file);
  EXPECT_EQ(binary.exit_code, 3);
  EXPECT_THAT(binary.err, Not(HasSubstr("\x1b")));
  EXPECT_THAT(binary.err,
              HasSubstr("expected 'HIERARCHY', found 'HIERARCHX\xEF\xBF\xBD"
                        "\xEF\xBF\xBDzz"));
  EXPECT_LT(binary.err.size(), 300u) << binary.err;
}

// Issue 46: retarget profiles are listed, printed and deleted.
TEST_F(CliTest, ProfilesListGetDelete) {
  CliRun none = Reach("profiles list --json");
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_THAT(none.out, Not(HasSubstr("profileId")));

  CliRun made = Reach("retarget --json --frames 5 " +
                      DataPath("mocap/cmu_02_01_walk.bvh") + " --to " +
                      std::string(REACH_EXAMPLES_DIR) +
                      "/humanoid.skeleton.json");
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const std::string id =
      nlohmann::json::parse(made.out)["profileId"].get<std::string>();
  ASSERT_EQ(id.size(), 64u);

  CliRun list = Reach("profiles list --json");
  ASSERT_EQ(list.exit_code, 0) << list.err;
  v1::ListRetargetProfilesResponse listed;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(list.out, &listed).ok())
      << list.out;
  ASSERT_EQ(listed.profiles_size(), 1);
  EXPECT_EQ(listed.profiles(0).profile_id(), id);
  EXPECT_EQ(listed.profiles(0).source_name(), "cmu_02_01_walk");
  CliRun table = Reach("profiles list");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr(id));
  EXPECT_THAT(table.out, HasSubstr("cmu_02_01_walk ("));

  CliRun get = Reach("profiles get " + id);
  ASSERT_EQ(get.exit_code, 0) << get.err;
  v1::RetargetProfile profile;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(get.out, &profile).ok())
      << get.out;
  EXPECT_EQ(profile.profile_id(), id);
  CliRun with_skeletons = Reach("profiles get --skeletons " + id);
  ASSERT_EQ(with_skeletons.exit_code, 0) << with_skeletons.err;
  v1::GetRetargetProfileResponse whole;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(with_skeletons.out,
                                                          &whole)
                  .ok());
  EXPECT_GT(whole.source_skeleton().joints_size(), 0);
  EXPECT_GT(whole.target_skeleton().joints_size(), 0);

  CliRun del = Reach("profiles delete " + id);
  EXPECT_EQ(del.exit_code, 0) << del.err;
  EXPECT_THAT(del.out, HasSubstr("deleted " + id));
  EXPECT_THAT(Reach("profiles list --json").out, Not(HasSubstr(id)));
  CliRun gone = Reach("profiles get " + id);
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_THAT(gone.err, HasSubstr("NOT_FOUND"));
  EXPECT_EQ(Reach("profiles").exit_code, 2);
}

}  // namespace
}  // namespace reach
