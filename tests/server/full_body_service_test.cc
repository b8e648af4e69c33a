// SOLVER_FULL_BODY through the real server on a loopback port: Solve,
// SolveBatch and SolveStream on examples/humanoid.skeleton.json, every
// answer checked by a forward kinematics written here (not the library's
// ComputeGlobals), bad input named by field, and the solver's metrics.
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"
#include "server/ik_service.h"
#include "server/metrics.h"
#include "tests/testing/service.h"

namespace reach {
namespace {

using Eigen::Quaterniond;
using Eigen::Vector3d;
using ::reach::testing::Context;
using ::reach::testing::MustRegister;
using ::reach::testing::TestServer;
using ::testing::HasSubstr;

// --- An independent forward kinematics over the wire skeleton -------------

// One joint's local transform: p_parent = t + r * (s * p_local), as
// skeleton.proto defines Transform.
struct Frame {
  Vector3d t = Vector3d::Zero();
  Quaterniond r = Quaterniond::Identity();
  double s = 1.0;
};

// The rest pose of `skeleton` as skeleton.proto defines it: unset rotation
// identity, unset (0) scale 1.
std::vector<Frame> RestLocals(const v1::Skeleton& skeleton) {
  std::vector<Frame> locals;
  for (const v1::Joint& joint : skeleton.joints()) {
    Frame f;
    const v1::Transform& rest = joint.rest();
    f.t = Vector3d(rest.translation().x(), rest.translation().y(),
                   rest.translation().z());
    if (rest.has_rotation()) {
      f.r = Quaterniond(rest.rotation().w(), rest.rotation().x(),
                        rest.rotation().y(), rest.rotation().z());
    }
    if (rest.scale() != 0.0) f.s = rest.scale();
    locals.push_back(f);
  }
  return locals;
}

// Writes a response's changed joints into `locals` (the request's start),
// as solve.proto documents the flat arrays.
void Apply(const v1::SolveResponse& response, std::vector<Frame>* locals) {
  ASSERT_EQ(response.rotations_size(), 4 * response.rotated_joints_size());
  ASSERT_EQ(response.translations_size(),
            3 * response.translated_joints_size());
  for (int i = 0; i < response.rotated_joints_size(); ++i) {
    const uint32_t j = response.rotated_joints(i);
    ASSERT_LT(j, locals->size());
    const double* q = response.rotations().data() + 4 * i;
    (*locals)[j].r = Quaterniond(q[0], q[1], q[2], q[3]);
  }
  for (int i = 0; i < response.translated_joints_size(); ++i) {
    const uint32_t j = response.translated_joints(i);
    ASSERT_LT(j, locals->size());
    const double* t = response.translations().data() + 3 * i;
    (*locals)[j].t = Vector3d(t[0], t[1], t[2]);
  }
}

// Model-space frames: a parent's frame composed with the child's local.
std::vector<Frame> Globals(const v1::Skeleton& skeleton,
                           const std::vector<Frame>& locals) {
  std::vector<Frame> globals(locals.size());
  for (size_t j = 0; j < locals.size(); ++j) {
    const int parent = skeleton.joints(static_cast<int>(j)).parent();
    const Frame& l = locals[j];
    if (parent < 0) {
      globals[j] = l;
      continue;
    }
    const Frame& p = globals[parent];
    globals[j].t = p.t + p.r * (p.s * l.t);
    globals[j].r = p.r * l.r;
    globals[j].s = p.s * l.s;
  }
  return globals;
}

// Angle in [0, pi] between two rotations.
double AngleBetween(const Quaterniond& a, const Quaterniond& b) {
  const double dot = std::abs(a.normalized().dot(b.normalized()));
  return 2.0 * std::acos(std::min(1.0, dot));
}

// Angle in [0, pi] between two directions.
double AngleBetween(const Vector3d& a, const Vector3d& b) {
  return std::atan2(a.cross(b).norm(), a.dot(b));
}

int JointIndex(const v1::Skeleton& skeleton, const std::string& name) {
  for (int j = 0; j < skeleton.joints_size(); ++j) {
    if (skeleton.joints(j).name() == name) return j;
  }
  ADD_FAILURE() << "no joint " << name;
  return 0;
}

// The effector of a goal as solve.proto defines it: the chain's tip, or
// tip_joint.
int EffectorOf(const v1::Skeleton& skeleton, const v1::Goal& goal) {
  if (goal.chain().empty()) return JointIndex(skeleton, goal.tip_joint());
  for (const v1::Chain& chain : skeleton.chains()) {
    if (chain.name() == goal.chain()) return JointIndex(skeleton, chain.tip());
  }
  ADD_FAILURE() << "no chain " << goal.chain();
  return 0;
}

// The errors of `goal` under `locals`, measured here: position, and
// orientation or look-at angle.
struct Measured {
  double position = 0.0;
  double angle = 0.0;
};
Measured Measure(const v1::Skeleton& skeleton, const std::vector<Frame>& locals,
                 const v1::Goal& goal) {
  const Frame g = Globals(skeleton, locals)[EffectorOf(skeleton, goal)];
  const Vector3d target(goal.target().x(), goal.target().y(),
                        goal.target().z());
  Measured m;
  if (goal.has_aim_axis()) {
    const Vector3d axis(goal.aim_axis().x(), goal.aim_axis().y(),
                        goal.aim_axis().z());
    m.angle = AngleBetween(g.r * axis, target - g.t);
    return m;
  }
  m.position = (g.t - target).norm();
  if (goal.has_target_orientation()) {
    const v1::Quat& q = goal.target_orientation();
    m.angle = AngleBetween(g.r, Quaterniond(q.w(), q.x(), q.y(), q.z()));
  }
  return m;
}

// Checks every result of `response` against the pose `locals` (the
// request's start with the response applied): reached, and the reported
// errors are the measured ones, within the reported tolerances.
void ExpectAllReached(const v1::Skeleton& skeleton,
                      const std::vector<Frame>& locals,
                      const v1::SolveRequest& request,
                      const v1::SolveResponse& response) {
  ASSERT_FALSE(response.has_error()) << response.error().message();
  ASSERT_EQ(response.results_size(), request.goals_size());
  for (int i = 0; i < request.goals_size(); ++i) {
    SCOPED_TRACE(absl::StrCat("goal ", i));
    const v1::Goal& goal = request.goals(i);
    const v1::GoalResult& result = response.results(i);
    const Measured m = Measure(skeleton, locals, goal);
    EXPECT_EQ(result.solver(), v1::SOLVER_FULL_BODY);
    EXPECT_TRUE(result.reached());
    EXPECT_GT(result.iterations(), 0);
    EXPECT_GT(result.tolerance(), 0.0);
    EXPECT_LE(m.position, result.tolerance());
    EXPECT_NEAR(result.position_error(), m.position, 1e-9);
    EXPECT_LE(m.angle, result.orientation_tolerance_rad() + 1e-9);
    EXPECT_NEAR(result.orientation_error_rad(), m.angle, 1e-7);
  }
}

// --- Requests --------------------------------------------------------------

v1::Vec3 V(double x, double y, double z) {
  v1::Vec3 v;
  v.set_x(x);
  v.set_y(y);
  v.set_z(z);
  return v;
}

v1::Goal FullBodyGoal(const std::string& chain, const v1::Vec3& target,
                      int priority) {
  v1::Goal goal;
  goal.set_chain(chain);
  goal.set_solver(v1::SOLVER_FULL_BODY);
  *goal.mutable_target() = target;
  goal.set_priority(priority);
  return goal;
}

// A humanoid frame as a mocap rig sends it: both feet placed (position and
// orientation, priority 0, knees facing forward), both hands (priority 1),
// the head looking at a point (priority 2); every target moves smoothly
// with `frame`.
v1::SolveRequest BodyFrame(const std::string& id, int frame) {
  const double t = 0.05 * frame;
  v1::SolveRequest request;
  request.set_skeleton_id(id);
  request.set_sequence(frame);
  for (const double side : {1.0, -1.0}) {
    // Feet a little below the hips' reach, striding.
    v1::Goal* foot = request.add_goals();
    *foot = FullBodyGoal(side > 0 ? "l_leg" : "r_leg",
                         V(side * 0.11, 0.1 + 0.02 * std::sin(t + side),
                           0.08 * side * std::sin(t)),
                         0);
    foot->mutable_target_orientation()->set_w(1.0);
    *foot->mutable_pole() = V(side * 0.1, 0.5, 1.0);
    // Hands in front of the chest, circling.
    *request.add_goals() = FullBodyGoal(
        side > 0 ? "l_arm" : "r_arm",
        V(side * (0.3 + 0.05 * std::cos(t)), 1.2 + 0.05 * std::sin(t), 0.3), 1);
  }
  v1::Goal* look = request.add_goals();
  look->set_tip_joint("head");
  look->set_solver(v1::SOLVER_FULL_BODY);
  *look->mutable_target() = V(0.5 * std::sin(0.5 * t), 1.6, 2.0);
  *look->mutable_aim_axis() = V(0, 0, 1);
  look->set_priority(2);
  return request;
}

class FullBodyServiceTest : public ::testing::Test {
 protected:
  FullBodyServiceTest() {
    std::ifstream in(REACH_EXAMPLES_DIR "/humanoid.skeleton.json");
    std::stringstream text;
    text << in.rdbuf();
    const auto status =
        google::protobuf::util::JsonStringToMessage(text.str(), &humanoid_);
    EXPECT_TRUE(status.ok()) << status.ToString();
    id_ = MustRegister(*server_.stub, humanoid_);
    rest_ = RestLocals(humanoid_);
  }

  grpc::Status Solve(const v1::SolveRequest& request,
                     v1::SolveResponse* response) {
    return server_.stub->Solve(Context().get(), request, response);
  }

  // Both hands, chains that share the spine, with the pelvis pinned: the
  // targets lie beyond the arms' reach from the rest shoulders, so the
  // spine must lean for both at once.
  v1::SolveRequest BothHands() {
    v1::SolveRequest request;
    request.set_skeleton_id(id_);
    *request.add_goals() = FullBodyGoal("l_arm", V(0.25, 1.05, 0.55), 0);
    *request.add_goals() = FullBodyGoal("r_arm", V(-0.25, 1.05, 0.55), 0);
    request.mutable_full_body()->set_root_mode(v1::ROOT_MODE_PINNED);
    return request;
  }

  TestServer server_;
  v1::Skeleton humanoid_;
  std::string id_;
  std::vector<Frame> rest_;
};

TEST_F(FullBodyServiceTest, BothHandsOnSharedSpineAreReached) {
  const v1::SolveRequest request = BothHands();
  // Out of reach of the arms alone: the spine has work to do.
  const std::vector<Frame> rest_globals = Globals(humanoid_, rest_);
  for (const char* shoulder : {"l_shoulder", "r_shoulder"}) {
    const int j = JointIndex(humanoid_, shoulder);
    const Vector3d target(0.25 * (shoulder[0] == 'l' ? 1 : -1), 1.05, 0.55);
    EXPECT_GT((rest_globals[j].t - target).norm(), 0.28 + 0.25 + 0.1);
  }
  v1::SolveResponse response;
  const grpc::Status status = Solve(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<Frame> pose = rest_;
  Apply(response, &pose);
  ExpectAllReached(humanoid_, pose, request, response);

  // Pinned: the pelvis neither turned nor moved; the spine leaned.
  const int hips = JointIndex(humanoid_, "hips");
  EXPECT_THAT(response.rotated_joints(),
              ::testing::Not(::testing::Contains(hips)));
  EXPECT_EQ(response.translated_joints_size(), 0);
  EXPECT_THAT(response.rotated_joints(),
              ::testing::Contains(JointIndex(humanoid_, "spine0")));
  // Bone lengths never change: every local translation is its rest one.
  for (size_t j = 0; j < pose.size(); ++j) {
    EXPECT_TRUE(pose[j].t == rest_[j].t) << j;
  }

  // The goals' order does not matter: the same answer, bit for bit.
  v1::SolveRequest swapped = request;
  swapped.mutable_goals()->SwapElements(0, 1);
  v1::SolveResponse again;
  ASSERT_TRUE(Solve(swapped, &again).ok());
  EXPECT_EQ(again.results(0).SerializeAsString(),
            response.results(1).SerializeAsString());
  again.mutable_results()->SwapElements(0, 1);
  EXPECT_EQ(again.SerializeAsString(), response.SerializeAsString());
}

TEST_F(FullBodyServiceTest, FreeRootMovesThePelvisAndReportsItsTranslation) {
  v1::SolveRequest request = BothHands();
  request.mutable_full_body()->set_root_mode(v1::ROOT_MODE_FREE);
  v1::SolveResponse response;
  ASSERT_TRUE(Solve(request, &response).ok());
  std::vector<Frame> pose = rest_;
  Apply(response, &pose);
  ExpectAllReached(humanoid_, pose, request, response);
  // The pelvis (joint 0, a skeleton root) translated, and says so.
  ASSERT_EQ(response.translated_joints_size(), 1);
  EXPECT_EQ(response.translated_joints(0), 0u);

  // Its translation fully stiff: it stays, and the spine does the work.
  request.mutable_full_body()->set_root_translation_stiffness(1.0);
  ASSERT_TRUE(Solve(request, &response).ok());
  EXPECT_EQ(response.translated_joints_size(), 0);
  pose = rest_;
  Apply(response, &pose);
  ExpectAllReached(humanoid_, pose, request, response);
}

TEST_F(FullBodyServiceTest, WholeBodyFrameFeetHandsAndLookAt) {
  const v1::SolveRequest request = BodyFrame(id_, 3);
  v1::SolveResponse response;
  const grpc::Status status = Solve(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<Frame> pose = rest_;
  Apply(response, &pose);
  ExpectAllReached(humanoid_, pose, request, response);
  // The look-at reports no position error, only its angle.
  EXPECT_EQ(response.results(4).position_error(), 0.0);
}

TEST_F(FullBodyServiceTest, BatchItemsAreSolvedLikeUnaryCalls) {
  v1::SolveBatchRequest batch;
  batch.set_skeleton_id(id_);
  for (int i = 0; i < 6; ++i) {
    v1::SolveRequest* item = batch.add_items();
    *item = BodyFrame("", 4 * i);
    if (i % 2 == 1) {
      item->mutable_full_body()->set_root_mode(v1::ROOT_MODE_PRE_PULL);
    }
  }
  *batch.add_items() = BothHands();
  batch.mutable_items(6)->set_sequence(6);
  // A bad item gets its own error; the others are solved.
  v1::SolveRequest* bad = batch.add_items();
  *bad = BodyFrame(id_, 1);
  bad->set_sequence(7);
  bad->mutable_goals(2)->set_priority(99);

  v1::SolveBatchResponse answers;
  const grpc::Status status =
      server_.stub->SolveBatch(Context().get(), batch, &answers);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(answers.items_size(), batch.items_size());
  for (int i = 0; i < 7; ++i) {
    SCOPED_TRACE(absl::StrCat("item ", i));
    v1::SolveRequest request = batch.items(i);
    if (request.skeleton_id().empty()) request.set_skeleton_id(id_);
    const v1::SolveResponse& item = answers.items(i);
    std::vector<Frame> pose = rest_;
    Apply(item, &pose);
    ExpectAllReached(humanoid_, pose, request, item);
    // The batch's worker writes items straight from the solve: the same
    // bytes as a unary Solve of the same request.
    v1::SolveResponse unary;
    ASSERT_TRUE(Solve(request, &unary).ok());
    EXPECT_EQ(item.SerializeAsString(), unary.SerializeAsString());
  }
  const v1::SolveResponse& failed = answers.items(7);
  EXPECT_EQ(failed.sequence(), 7u);
  EXPECT_EQ(failed.error().code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(failed.error().message(), HasSubstr("goals[2].priority"));
}

TEST_F(FullBodyServiceTest, StreamFramesContinueThePreviousAnswer) {
  constexpr int kFrames = 20;
  auto context = Context(120);
  std::unique_ptr<grpc::ClientReaderWriter<v1::SolveRequest, v1::SolveResponse>>
      stream = server_.stub->SolveStream(context.get());
  std::vector<Frame> pose = rest_;  // The client's copy of the character.
  int warm_iterations = 0, rest_iterations = 0;
  for (int frame = 0; frame < kFrames; ++frame) {
    SCOPED_TRACE(absl::StrCat("frame ", frame));
    const v1::SolveRequest request = BodyFrame(id_, frame);
    // The same frame as a unary call starting from the client's copy of
    // the previous answer: what a warm start must give.
    v1::SolveRequest from_previous = request;
    v1::Pose* start = from_previous.mutable_start_pose();
    for (const Frame& f : pose) {
      v1::Quat* q = start->add_rotations();
      q->set_w(f.r.w());
      q->set_x(f.r.x());
      q->set_y(f.r.y());
      q->set_z(f.r.z());
    }
    *start->mutable_root_translation() =
        V(pose[0].t.x(), pose[0].t.y(), pose[0].t.z());
    v1::SolveResponse expected, from_rest;
    ASSERT_TRUE(Solve(from_previous, &expected).ok());
    ASSERT_TRUE(Solve(request, &from_rest).ok());

    ASSERT_TRUE(stream->Write(request));
    v1::SolveResponse response;
    ASSERT_TRUE(stream->Read(&response));
    EXPECT_EQ(response.sequence(), static_cast<uint64_t>(frame));
    // The stream started from its previous answer, bit for bit.
    EXPECT_EQ(response.SerializeAsString(), expected.SerializeAsString());
    Apply(response, &pose);
    ExpectAllReached(humanoid_, pose, request, response);
    if (frame > 0) {
      // Starting near the answer takes fewer iterations than from rest.
      EXPECT_LT(response.results(0).iterations(),
                from_rest.results(0).iterations());
      warm_iterations += response.results(0).iterations();
      rest_iterations += from_rest.results(0).iterations();
    }
  }
  stream->WritesDone();
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  std::printf(
      "full-body stream: %d iterations warm over %d frames, %d from "
      "rest\n",
      warm_iterations, kFrames - 1, rest_iterations);
  EXPECT_LT(warm_iterations, rest_iterations);
}

TEST_F(FullBodyServiceTest, BadInputIsNamedByField) {
  struct Case {
    const char* what;
    std::function<void(v1::SolveRequest*)> breaks;
    grpc::StatusCode code;
    const char* field;
  };
  const Case cases[] = {
      {"zero aim axis",
       [](v1::SolveRequest* r) {
         *r->mutable_goals(4)->mutable_aim_axis() = V(0, 0, 0);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "goals[4].aim_axis"},
      {"aim axis not finite",
       [](v1::SolveRequest* r) {
         r->mutable_goals(4)->mutable_aim_axis()->set_y(NAN);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "goals[4].aim_axis"},
      {"look-at with an orientation",
       [](v1::SolveRequest* r) {
         r->mutable_goals(4)->mutable_target_orientation()->set_w(1);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "goals[4].target_orientation"},
      {"unknown full_body.root_joint",
       [](v1::SolveRequest* r) {
         r->mutable_full_body()->set_root_joint("pelvis");
       },
       grpc::StatusCode::NOT_FOUND, "full_body.root_joint"},
      {"effector above the solver root",
       [](v1::SolveRequest* r) {
         r->mutable_full_body()->set_root_joint("spine0");
       },
       grpc::StatusCode::INVALID_ARGUMENT, "goals[0].chain"},
      {"unknown root mode",
       [](v1::SolveRequest* r) {
         r->mutable_full_body()->set_root_mode(static_cast<v1::RootMode>(9));
       },
       grpc::StatusCode::INVALID_ARGUMENT, "full_body.root_mode"},
      {"root translation stiffness",
       [](v1::SolveRequest* r) {
         r->mutable_full_body()->set_root_translation_stiffness(1.5);
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       "full_body.root_translation_stiffness"},
      {"iterations",
       [](v1::SolveRequest* r) {
         r->mutable_full_body()->set_max_iterations(-1);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "full_body.max_iterations"},
      {"budget",
       [](v1::SolveRequest* r) {
         r->mutable_full_body()->set_time_budget_ms(1e9);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "full_body.time_budget_ms"},
      {"floor",
       [](v1::SolveRequest* r) {
         r->mutable_full_body()->set_plant_height(
             std::numeric_limits<double>::infinity());
       },
       grpc::StatusCode::INVALID_ARGUMENT, "full_body.plant_height"},
      {"priority 99",
       [](v1::SolveRequest* r) { r->mutable_goals(1)->set_priority(99); },
       grpc::StatusCode::INVALID_ARGUMENT, "goals[1].priority"},
      {"negative priority",
       [](v1::SolveRequest* r) { r->mutable_goals(1)->set_priority(-1); },
       grpc::StatusCode::INVALID_ARGUMENT, "goals[1].priority"},
      {"aim axis on a chain solver's goal",
       [](v1::SolveRequest* r) {
         v1::Goal* g = r->mutable_goals(1);
         g->set_solver(v1::SOLVER_JACOBIAN_DLS);
         g->set_priority(0);
         *g->mutable_aim_axis() = V(0, 0, 1);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "goals[1].aim_axis"},
      {"priority on a chain solver's goal",
       [](v1::SolveRequest* r) {
         r->mutable_goals(1)->set_solver(v1::SOLVER_FABRIK);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "goals[1].priority"},
      {"no effector",
       [](v1::SolveRequest* r) { r->mutable_goals(4)->clear_tip_joint(); },
       grpc::StatusCode::INVALID_ARGUMENT, "goals[4].tip_joint"},
      {"unknown effector",
       [](v1::SolveRequest* r) { r->mutable_goals(4)->set_tip_joint("eye"); },
       grpc::StatusCode::NOT_FOUND, "goals[4].tip_joint"},
      {"chain option",
       [](v1::SolveRequest* r) {
         r->mutable_goals(0)->mutable_options()->set_max_restarts(3);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "goals[0].options.max_restarts"},
  };
  // Goal 1 is the left hand at priority 1.
  ASSERT_EQ(BodyFrame(id_, 0).goals(1).priority(), 1);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    v1::SolveRequest request = BodyFrame(id_, 0);
    c.breaks(&request);
    v1::SolveResponse response;
    const grpc::Status status = Solve(request, &response);
    EXPECT_EQ(status.error_code(), c.code) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(c.field));
  }

  // On a stream a bad frame gets its error in its own response, and the
  // stream goes on.
  auto context = Context();
  auto stream = server_.stub->SolveStream(context.get());
  v1::SolveRequest bad = BodyFrame(id_, 0);
  bad.mutable_full_body()->set_root_joint("pelvis");
  ASSERT_TRUE(stream->Write(bad));
  ASSERT_TRUE(stream->Write(BodyFrame(id_, 1)));
  stream->WritesDone();
  v1::SolveResponse response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.error().code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(response.error().message(), HasSubstr("full_body.root_joint"));
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_FALSE(response.has_error()) << response.error().message();
  EXPECT_EQ(response.sequence(), 1u);
  EXPECT_TRUE(stream->Finish().ok());

  // A skeleton's stiffness outside [0, 1] is refused at registration.
  v1::RegisterSkeletonRequest stiff;
  *stiff.mutable_skeleton() = humanoid_;
  stiff.mutable_skeleton()->mutable_joints(11)->set_stiffness(2.0);
  v1::RegisterSkeletonResponse registered;
  const grpc::Status status =
      server_.stub->RegisterSkeleton(Context().get(), stiff, &registered);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("joints[11].stiffness"));
}

TEST_F(FullBodyServiceTest, StiffJointsAreRegisteredAndHonoured) {
  // A fully stiff spine (and pinned pelvis): only the arms may move, so the
  // far targets of BothHands cannot be reached, and the spine stays.
  v1::Skeleton stiff = humanoid_;
  stiff.set_name("stiff spine");
  for (const char* name : {"spine0", "spine1", "spine2"}) {
    stiff.mutable_joints(JointIndex(stiff, name))->set_stiffness(1.0);
  }
  v1::SolveRequest request = BothHands();
  request.set_skeleton_id(MustRegister(*server_.stub, stiff));
  v1::SolveResponse response;
  ASSERT_TRUE(Solve(request, &response).ok());
  for (const char* name : {"spine0", "spine1", "spine2"}) {
    EXPECT_THAT(response.rotated_joints(),
                ::testing::Not(::testing::Contains(JointIndex(stiff, name))))
        << name;
  }
  EXPECT_FALSE(response.results(0).reached());
  EXPECT_FALSE(response.results(1).reached());
  // The stored definition keeps the field (GetSkeleton returns it).
  v1::GetSkeletonRequest get;
  get.set_skeleton_id(request.skeleton_id());
  v1::GetSkeletonResponse got;
  ASSERT_TRUE(server_.stub->GetSkeleton(Context().get(), get, &got).ok());
  EXPECT_EQ(got.skeleton().joints(JointIndex(stiff, "spine1")).stiffness(),
            1.0);
}

TEST_F(FullBodyServiceTest, MetricsCarryTheFullBodySolverLabel) {
  v1::SolveResponse response;
  ASSERT_TRUE(Solve(BodyFrame(id_, 0), &response).ok());
  const std::string text = prometheus::TextSerializer().Serialize(
      server_.server->service().metrics().registry()->Collect());
  // Five goals, all reached; one request whose goals all ran full_body.
  EXPECT_THAT(text, HasSubstr("reach_goals_total{outcome=\"reached\","
                              "solver=\"full_body\"} 5"));
  EXPECT_THAT(text, HasSubstr("reach_solve_duration_seconds_count{solver="
                              "\"full_body\"} 1"));
  EXPECT_THAT(text, HasSubstr("reach_solve_iterations_count{solver="
                              "\"full_body\"} 5"));
}

}  // namespace
}  // namespace reach
