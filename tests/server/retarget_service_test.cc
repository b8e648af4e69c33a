// reach.v1.RetargetService through the real server on a loopback port, on
// real files sent as bytes (ImportSkeleton): the CMU walk (centimetres, Y
// up) onto BCN_Epileptic.glb (metres). Profiles made, found, listed,
// deleted and kept across a restart in a real SQLite file; Retarget,
// RetargetBatch and RetargetStream answered as the retarget library
// answers in-process, and checked by a forward kinematics of the test's
// own (goals reached, planted feet held); bad input named by field; every
// limit's flag.
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"
#include "reach/v1/retarget.grpc.pb.h"
#include "retarget/characterize.h"
#include "retarget/retargeter.h"
#include "retarget/transfer.h"
#include "tests/testing/models.h"
#include "tests/testing/service.h"
#include "tests/testing/sweep.h"
#include "wire/convert.h"

namespace reach {
namespace {

using Eigen::Vector3d;
using ::reach::testing::Context;
using ::reach::testing::IndependentFk;
using ::reach::testing::IndependentGlobals;
using ::reach::testing::TestServer;
using ::reach::testing::TestServerOptions;
using ::testing::HasSubstr;

constexpr char kSource[] = "mocap/cmu_02_01_walk.bvh";
constexpr char kTarget[] = "rigs/BCN_Epileptic.glb";

Vector3d ToVector(const v1::Vec3& v) { return Vector3d(v.x(), v.y(), v.z()); }

// The largest difference between two wire poses' numbers.
double PoseDifference(const v1::Pose& a, const v1::Pose& b) {
  if (a.rotations_size() != b.rotations_size()) return INFINITY;
  double worst = (ToVector(a.root_translation()) -
                  ToVector(b.root_translation()))
                     .cwiseAbs()
                     .maxCoeff();
  for (int i = 0; i < a.rotations_size(); ++i) {
    const v1::Quat& p = a.rotations(i);
    const v1::Quat& q = b.rotations(i);
    worst = std::max({worst, std::abs(p.w() - q.w()), std::abs(p.x() - q.x()),
                      std::abs(p.y() - q.y()), std::abs(p.z() - q.z())});
  }
  return worst;
}

// The library in-process on the skeletons the server registered: what every
// path of the service must answer.
struct LocalRetarget {
  LocalRetarget(const v1::Skeleton& source_wire,
                const v1::Skeleton& target_wire) {
    SkeletonDef def;
    EXPECT_TRUE(FromProto(source_wire, &def).ok());
    source = *Skeleton::Create(def);
    EXPECT_TRUE(FromProto(target_wire, &def).ok());
    target = *Skeleton::Create(def);
    source_roles = *retarget::Characterize(source);
    target_roles = *retarget::Characterize(target);
    const retarget::RetargetSide s{&source, &source_roles, RestPose(source)};
    retarget::RetargetSide t{&target, &target_roles, RestPose(target)};
    t.reference = *retarget::AlignLimbs(s, t);
    retargeter.emplace(*retarget::Retargeter::Create(s, t, {}));
  }
  Skeleton source, target;
  retarget::Characterization source_roles, target_roles;
  std::optional<retarget::Retargeter> retargeter;
};

// The legs' mean length (thigh to shin to foot), by the test's own forward
// kinematics of the rest pose.
double LegLength(const Skeleton& skeleton,
                 const retarget::Characterization& roles) {
  const IndependentGlobals rest = IndependentFk(skeleton, RestPose(skeleton));
  double sum = 0.0;
  for (const retarget::Leg& leg : roles.legs) {
    sum += (rest.position[leg.thigh] - rest.position[leg.shin]).norm() +
           (rest.position[leg.shin] - rest.position[leg.foot]).norm();
  }
  return sum / 2;
}

class RetargetServiceTest : public ::testing::Test {
 protected:
  explicit RetargetServiceTest(const ServerOptions& options =
                                   TestServerOptions())
      : server_(options),
        retarget_(v1::RetargetService::NewStub(server_.channel)) {}

  void SetUp() override {
    source_ = Import(kSource, /*motion=*/true);
    target_ = Import(kTarget, /*motion=*/false);
    ASSERT_GT(source_.motion_size(), 100);
  }

  v1::ImportSkeletonResponse Import(const std::string& name, bool motion) {
    return testing::MustImport(*server_.stub,
                               std::string(REACH_TEST_DATA) + "/" + name,
                               motion);
  }

  v1::RetargetProfileSpec Spec() const {
    v1::RetargetProfileSpec spec;
    spec.mutable_source()->set_skeleton_id(source_.skeleton_id());
    spec.mutable_target()->set_skeleton_id(target_.skeleton_id());
    return spec;
  }

  grpc::Status Create(const v1::RetargetProfileSpec& spec,
                      v1::CreateRetargetProfileResponse* response) {
    v1::CreateRetargetProfileRequest request;
    *request.mutable_spec() = spec;
    return retarget_->CreateRetargetProfile(Context().get(), request,
                                            response);
  }

  std::string MustCreate(const v1::RetargetProfileSpec& spec) {
    v1::CreateRetargetProfileResponse response;
    const grpc::Status status = Create(spec, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.profile().profile_id();
  }

  // The clip's frames [1, 1 + count) (frame 0 of the CMU clips is a
  // calibration T-pose).
  v1::RetargetBatchRequest Batch(const std::string& profile_id,
                                 int count) const {
    v1::RetargetBatchRequest request;
    request.set_profile_id(profile_id);
    request.set_frame_time_s(source_.frame_time_s());
    for (int f = 1; f <= count && f < source_.motion_size(); ++f) {
      *request.add_frames() = source_.motion(f);
    }
    return request;
  }

  TestServer server_;
  std::unique_ptr<v1::RetargetService::Stub> retarget_;
  v1::ImportSkeletonResponse source_;
  v1::ImportSkeletonResponse target_;
};

TEST_F(RetargetServiceTest, ProfileIsCreatedFoundListedAndDeleted) {
  v1::CreateRetargetProfileResponse created;
  ASSERT_TRUE(Create(Spec(), &created).ok());
  EXPECT_TRUE(created.created());
  const v1::RetargetProfile& profile = created.profile();
  EXPECT_EQ(profile.profile_id().size(), 64u);
  EXPECT_EQ(profile.version(), 1);
  // The report: each side's roles by joint name, how each was decided.
  auto joint_of = [](const v1::RetargetSideReport& side,
                     const std::string& role) -> std::string {
    for (const v1::RoleMapping& m : side.roles()) {
      if (m.role() == role) return m.joint() + "/" + m.decided();
    }
    return "";
  };
  EXPECT_EQ(joint_of(profile.source(), "left.thigh"), "LeftUpLeg/name");
  EXPECT_EQ(joint_of(profile.source(), "left.hand"), "LeftHand/name");
  EXPECT_EQ(joint_of(profile.target(), "left.hand"), "B_Hand_Left/name");
  EXPECT_EQ(joint_of(profile.target(), "right.shin"), "B_Knee_Right/name");
  EXPECT_EQ(profile.source().skeleton_id(), source_.skeleton_id());
  EXPECT_GT(profile.target().unmapped_size(), 0);  // Fingers, twist joints.
  // The ratio of the legs' lengths (thigh to shin to foot), measured here.
  LocalRetarget local(source_.skeleton(), target_.skeleton());
  EXPECT_NEAR(profile.pelvis_scale(),
              LegLength(local.target, local.target_roles) /
                  LegLength(local.source, local.source_roles),
              1e-9);
  EXPECT_EQ(profile.target_reference().rotations_size(),
            target_.skeleton().joints_size());

  // Idempotent: the same spec is the same profile.
  v1::CreateRetargetProfileResponse again;
  ASSERT_TRUE(Create(Spec(), &again).ok());
  EXPECT_FALSE(again.created());
  EXPECT_EQ(again.profile().profile_id(), profile.profile_id());
  EXPECT_EQ(again.profile().version(), 1);
  // The same spec with -0.0 for 0 and an unknown field is the same profile.
  v1::RetargetProfileSpec same = Spec();
  same.set_pelvis_scale(-0.0);
  same.GetReflection()->MutableUnknownFields(&same)->AddVarint(999, 1);
  ASSERT_TRUE(Create(same, &again).ok());
  EXPECT_FALSE(again.created());
  EXPECT_EQ(again.profile().profile_id(), profile.profile_id());
  // Another option is another profile.
  v1::RetargetProfileSpec other = Spec();
  other.set_no_planting(true);
  const std::string other_id = MustCreate(other);
  EXPECT_NE(other_id, profile.profile_id());

  v1::GetRetargetProfileRequest get;
  get.set_profile_id(profile.profile_id());
  v1::GetRetargetProfileResponse got;
  ASSERT_TRUE(retarget_->GetRetargetProfile(Context().get(), get, &got).ok());
  EXPECT_EQ(got.profile().SerializeAsString(), profile.SerializeAsString());

  v1::ListRetargetProfilesRequest list;
  list.set_page_size(1);
  v1::ListRetargetProfilesResponse page;
  ASSERT_TRUE(
      retarget_->ListRetargetProfiles(Context().get(), list, &page).ok());
  ASSERT_EQ(page.profiles_size(), 1);
  EXPECT_EQ(page.profiles(0).profile_id(), profile.profile_id());
  EXPECT_EQ(page.profiles(0).source_name(), source_.skeleton().name());
  EXPECT_EQ(page.profiles(0).target_name(), target_.skeleton().name());
  ASSERT_FALSE(page.next_page_token().empty());
  list.set_page_token(page.next_page_token());
  ASSERT_TRUE(
      retarget_->ListRetargetProfiles(Context().get(), list, &page).ok());
  ASSERT_EQ(page.profiles_size(), 1);
  EXPECT_EQ(page.profiles(0).profile_id(), other_id);
  EXPECT_TRUE(page.next_page_token().empty());

  v1::DeleteRetargetProfileRequest remove;
  remove.set_profile_id(profile.profile_id());
  v1::DeleteRetargetProfileResponse removed;
  ASSERT_TRUE(
      retarget_->DeleteRetargetProfile(Context().get(), remove, &removed).ok());
  grpc::Status status = retarget_->GetRetargetProfile(Context().get(), get,
                                                      &got);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("profile_id: no retarget"));
  v1::RetargetRequest frame;
  frame.set_profile_id(profile.profile_id());
  *frame.mutable_source() = source_.motion(1);
  v1::RetargetResponse answer;
  status = retarget_->Retarget(Context().get(), frame, &answer);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  status = retarget_->DeleteRetargetProfile(Context().get(), remove, &removed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
}

// A source with a helper bone on one forearm only (real clips carry such)
// is accepted, and the profile's report says what differs.
TEST_F(RetargetServiceTest, AnAsymmetricRigIsAcceptedWithAWarning) {
  v1::Skeleton edited = source_.skeleton();
  edited.set_name("walk with a helper bone");
  int forearm = -1;
  for (int j = 0; j < edited.joints_size(); ++j) {
    if (edited.joints(j).name() == "LeftForeArm") forearm = j;
  }
  ASSERT_GE(forearm, 0);
  v1::Joint* helper = edited.add_joints();
  helper->set_name("LeftForeArmRoll");
  helper->set_parent(forearm);
  helper->mutable_rest()->mutable_translation()->set_x(1.5);
  helper->mutable_rest()->mutable_rotation()->set_w(1.0);
  v1::RetargetProfileSpec spec = Spec();
  spec.mutable_source()->set_skeleton_id(
      testing::MustRegister(*server_.stub, edited));
  v1::CreateRetargetProfileResponse created;
  const grpc::Status status = Create(spec, &created);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(created.profile().source().warnings_size(), 1);
  EXPECT_THAT(created.profile().source().warnings(0),
              HasSubstr("'LeftForeArmRoll'"));
  EXPECT_EQ(created.profile().target().warnings_size(), 0);
}

TEST_F(RetargetServiceTest, BadSpecsAreRefusedNamingTheField) {
  struct Case {
    std::string what;
    std::function<void(v1::RetargetProfileSpec*)> change;
    grpc::StatusCode code;
    std::string message;
  };
  const v1::Skeleton arm = testing::ToWire(testing::StraightChainDef(4), "arm");
  const std::string arm_id = testing::MustRegister(*server_.stub, arm);
  const std::vector<Case> cases = {
      {"no source", [](auto* s) { s->mutable_source()->clear_skeleton_id(); },
       grpc::StatusCode::INVALID_ARGUMENT, "spec.source.skeleton_id: required"},
      {"unknown target",
       [](auto* s) { s->mutable_target()->set_skeleton_id("abc"); },
       grpc::StatusCode::NOT_FOUND,
       "spec.target.skeleton_id: no skeleton 'abc'"},
      {"not a humanoid",
       [&](auto* s) { s->mutable_target()->set_skeleton_id(arm_id); },
       grpc::StatusCode::INVALID_ARGUMENT, "spec.target.skeleton: not a humanoid"},
      {"contact speed", [](auto* s) { s->set_contact_speed(20); },
       grpc::StatusCode::INVALID_ARGUMENT, "spec.contact_speed"},
      {"ankle height", [](auto* s) { s->set_ankle_height(-1); },
       grpc::StatusCode::INVALID_ARGUMENT, "spec.ankle_height"},
      {"iterations", [](auto* s) { s->set_max_iterations(5000); },
       grpc::StatusCode::INVALID_ARGUMENT, "spec.max_iterations"},
      {"floor", [](auto* s) { s->set_source_floor(NAN); },
       grpc::StatusCode::INVALID_ARGUMENT, "spec.source_floor"},
      {"override role",
       [](auto* s) {
         v1::RoleOverride* o = s->mutable_target()->add_overrides();
         o->set_role("left.tail");
         o->set_joint("B_Spine1");
       },
       grpc::StatusCode::INVALID_ARGUMENT, "spec.target.overrides[0].role"},
      {"override joint",
       [](auto* s) {
         v1::RoleOverride* o = s->mutable_source()->add_overrides();
         o->set_role("left.hand");
         o->set_joint("NoSuchJoint");
       },
       grpc::StatusCode::INVALID_ARGUMENT, "spec.source.overrides[0].joint"},
      {"reference size",
       [](auto* s) {
         s->mutable_source()->mutable_reference()->add_rotations()->set_w(1);
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       "spec.source.reference.rotations: has 1 rotations"},
  };
  for (const Case& c : cases) {
    v1::RetargetProfileSpec spec = Spec();
    c.change(&spec);
    v1::CreateRetargetProfileResponse response;
    const grpc::Status status = Create(spec, &response);
    EXPECT_EQ(status.error_code(), c.code) << c.what << ": "
                                           << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(c.message)) << c.what;
  }
  // Bounded before anything is built.
  v1::RetargetProfileSpec many = Spec();
  for (int i = 0; i < 65; ++i) {
    v1::RoleOverride* o = many.mutable_source()->add_overrides();
    o->set_role("pelvis");
    o->set_joint("Hips");
  }
  v1::CreateRetargetProfileResponse refused;
  grpc::Status status = Create(many, &refused);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("spec.source.overrides: has 65; at most 64"));
  v1::RetargetProfileSpec big = Spec();
  for (int i = 0; i < 30000; ++i) {
    big.mutable_target()->mutable_reference()->add_rotations()->set_w(1);
  }
  status = Create(big, &refused);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("bytes; at most 262144"));
  // Nothing was made.
  v1::ListRetargetProfilesResponse page;
  ASSERT_TRUE(retarget_
                  ->ListRetargetProfiles(Context().get(), {}, &page)
                  .ok());
  EXPECT_EQ(page.profiles_size(), 0);
}

TEST_F(RetargetServiceTest, BatchIsTheLibrarysClipAndHoldsPlantedFeet) {
  const std::string id = MustCreate(Spec());
  const v1::RetargetBatchRequest request =
      Batch(id, source_.motion_size() - 1);
  v1::RetargetBatchResponse response;
  const grpc::Status status =
      retarget_->RetargetBatch(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.frames_size(), request.frames_size());

  LocalRetarget local(source_.skeleton(), target_.skeleton());
  retarget::RetargetState state;
  retarget::RetargetScratch scratch;
  Pose source_pose, expected;
  const retarget::Characterization& tc = local.target_roles;
  const double leg = LegLength(local.target, tc);
  int planted_frames = 0;
  double worst_goal = 0.0, worst_slide = 0.0;
  std::array<std::optional<Vector3d>, 2> planted_at;
  for (int f = 0; f < response.frames_size(); ++f) {
    const v1::RetargetResponse& frame = response.frames(f);
    EXPECT_EQ(frame.sequence(), static_cast<uint64_t>(f));
    ASSERT_TRUE(FromProto(local.source, request.frames(f), &source_pose).ok());
    ASSERT_TRUE(local.retargeter
                    ->Apply(source_pose, request.frame_time_s(), state,
                            scratch, &expected, nullptr)
                    .ok());
    v1::Pose expected_wire;
    ToProto(expected, &expected_wire);
    ASSERT_EQ(PoseDifference(frame.target(), expected_wire), 0.0)
        << "frame " << f;

    // Independently: the returned pose's feet where the goals say, and a
    // planted foot stays where it landed (horizontally: its height follows
    // the heel).
    Pose pose;
    ASSERT_TRUE(FromProto(local.target, frame.target(), &pose).ok());
    const IndependentGlobals fk = IndependentFk(local.target, pose);
    const v1::LimbOutcome* feet[2] = {&frame.left_foot(), &frame.right_foot()};
    for (int k = 0; k < 2; ++k) {
      const v1::LimbOutcome& foot = *feet[k];
      ASSERT_TRUE(foot.active());
      const Vector3d at = fk.position[tc.legs[k].foot];
      const double off = (at - ToVector(foot.goal())).norm();
      EXPECT_NEAR(off, foot.position_error(), 1e-9) << "frame " << f;
      if (foot.reached()) worst_goal = std::max(worst_goal, off);
      if (foot.planted()) {
        ++planted_frames;
        if (!planted_at[k]) planted_at[k] = at;
        Vector3d slide = at - *planted_at[k];
        slide -= slide.dot(local.retargeter->floor_up()) *
                 local.retargeter->floor_up();
        worst_slide = std::max(worst_slide, slide.norm());
      } else {
        planted_at[k].reset();
      }
    }
  }
  // Counted: every frame, all goals reached (the server's own measure).
  const std::string text = prometheus::TextSerializer().Serialize(
      server_.server->service().metrics().registry()->Collect());
  EXPECT_THAT(text, HasSubstr(absl::StrCat(
                        "reach_retarget_frames_total{outcome=\"reached\"} ",
                        response.frames_size())));
  EXPECT_THAT(text, HasSubstr(absl::StrCat(
                        "reach_retarget_frame_seconds_count ",
                        response.frames_size())));
  EXPECT_THAT(text, HasSubstr("reach_retarget_profiles 1"));
  EXPECT_THAT(text, HasSubstr("grpc_server_handled_total{grpc_code=\"OK\","
                              "grpc_method=\"RetargetBatch\""));
  EXPECT_GT(planted_frames, response.frames_size() / 4);
  EXPECT_LT(worst_goal, 1e-3 * leg);
  // The bar: 1 cm per contact on a 1 m leg.
  EXPECT_LT(worst_slide, 0.01 * leg);
}

TEST_F(RetargetServiceTest, RetargetAnswersOneFrameOnItsOwn) {
  const std::string id = MustCreate(Spec());
  for (const int f : {1, 60, 200}) {
    v1::RetargetRequest request;
    request.set_profile_id(id);
    request.set_sequence(1000 + f);
    *request.mutable_source() = source_.motion(f);
    request.set_return_globals(true);
    v1::RetargetResponse response;
    const grpc::Status status =
        retarget_->Retarget(Context().get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.sequence(), static_cast<uint64_t>(1000 + f));
    // A batch of this one frame is the same answer.
    v1::RetargetBatchRequest one;
    one.set_profile_id(id);
    *one.add_frames() = source_.motion(f);
    v1::RetargetBatchResponse batch;
    ASSERT_TRUE(retarget_->RetargetBatch(Context().get(), one, &batch).ok());
    EXPECT_EQ(PoseDifference(batch.frames(0).target(), response.target()), 0.0);
    EXPECT_EQ(batch.frames(0).left_foot().planted(),
              response.left_foot().planted());
    // The globals are the pose's, by the test's own forward kinematics.
    LocalRetarget local(source_.skeleton(), target_.skeleton());
    Pose pose;
    ASSERT_TRUE(FromProto(local.target, response.target(), &pose).ok());
    const IndependentGlobals fk = IndependentFk(local.target, pose);
    ASSERT_EQ(response.globals_size(), local.target.num_joints());
    for (int j = 0; j < local.target.num_joints(); ++j) {
      EXPECT_LT((ToVector(response.globals(j).translation()) - fk.position[j])
                    .norm(),
                1e-9);
    }
  }
}

TEST_F(RetargetServiceTest, BadFramesAreNamed) {
  const std::string id = MustCreate(Spec());
  v1::RetargetRequest request;
  request.set_profile_id(id);
  *request.mutable_source() = source_.motion(1);
  request.mutable_source()->mutable_rotations(3)->set_w(7);
  v1::RetargetResponse response;
  grpc::Status status = retarget_->Retarget(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("source.rotations[3]"));
  request.mutable_source()->clear_rotations();
  status = retarget_->Retarget(Context().get(), request, &response);
  EXPECT_THAT(status.error_message(), HasSubstr("source.rotations: has 0"));
  *request.mutable_source() = source_.motion(1);
  request.set_frame_time_s(-1);
  status = retarget_->Retarget(Context().get(), request, &response);
  EXPECT_THAT(status.error_message(), HasSubstr("frame_time_s: -1"));
  request.set_frame_time_s(0);
  request.clear_profile_id();
  status = retarget_->Retarget(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("profile_id: required"));

  v1::RetargetBatchRequest batch = Batch(id, 10);
  batch.mutable_frames(7)->mutable_root_translation()->set_y(NAN);
  v1::RetargetBatchResponse answers;
  status = retarget_->RetargetBatch(Context().get(), batch, &answers);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("frames[7].root_translation: not finite"));
  EXPECT_EQ(answers.frames_size(), 0);
  batch.clear_frames();
  status = retarget_->RetargetBatch(Context().get(), batch, &answers);
  EXPECT_THAT(status.error_message(), HasSubstr("frames: has 0"));
}

TEST_F(RetargetServiceTest, StreamIsTheBatchFrameAfterFrame) {
  const std::string id = MustCreate(Spec());
  const int frames = 240;
  const v1::RetargetBatchRequest batch = Batch(id, frames);
  v1::RetargetBatchResponse expected;
  ASSERT_TRUE(retarget_->RetargetBatch(Context().get(), batch, &expected).ok());

  auto context = Context();
  auto stream = retarget_->RetargetStream(context.get());
  // Every frame in order, and after frame 100 one that does not fit the
  // source skeleton: it is answered with its error, the state untouched.
  std::thread writer([&] {
    for (int f = 0; f < frames; ++f) {
      v1::RetargetRequest request;
      request.set_profile_id(id);
      request.set_sequence(f);
      request.set_frame_time_s(batch.frame_time_s());
      *request.mutable_source() = batch.frames(f);
      stream->Write(request);
      if (f == 100) {
        request.set_sequence(9999);
        request.mutable_source()->mutable_rotations()->RemoveLast();
        stream->Write(request);
      }
    }
    stream->WritesDone();
  });
  v1::RetargetResponse response;
  int f = 0;
  bool saw_error = false;
  while (stream->Read(&response)) {
    if (response.sequence() == 9999) {
      EXPECT_EQ(response.error().code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_THAT(response.error().message(), HasSubstr("source.rotations"));
      saw_error = true;
      continue;
    }
    ASSERT_LT(f, frames);
    EXPECT_EQ(response.sequence(), static_cast<uint64_t>(f));
    EXPECT_FALSE(response.has_error()) << response.error().message();
    EXPECT_EQ(PoseDifference(response.target(), expected.frames(f).target()),
              0.0)
        << "frame " << f;
    EXPECT_EQ(response.left_foot().planted(),
              expected.frames(f).left_foot().planted());
    ++f;
  }
  writer.join();
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(f, frames);
  EXPECT_TRUE(saw_error);
}

TEST_F(RetargetServiceTest, StreamSkipsLatestWinsFramesAndStaysPlanted) {
  const std::string id = MustCreate(Spec());
  const int frames = 300;
  const v1::RetargetBatchRequest batch = Batch(id, frames);
  auto context = Context();
  auto stream = retarget_->RetargetStream(context.get());
  // All frames as fast as they go, latest wins: the server skips what it
  // cannot keep up with; the last is always answered.
  std::thread writer([&] {
    for (int f = 0; f < frames; ++f) {
      v1::RetargetRequest request;
      request.set_profile_id(id);
      request.set_sequence(f);
      request.set_latest_wins(true);
      request.set_frame_time_s(batch.frame_time_s());
      *request.mutable_source() = batch.frames(f);
      stream->Write(request);
    }
    stream->WritesDone();
  });
  v1::RetargetResponse response;
  int answered = 0, skipped = 0, planted = 0;
  uint64_t last = 0;
  while (stream->Read(&response)) {
    EXPECT_FALSE(response.has_error()) << response.error().message();
    last = response.sequence();
    if (response.skipped()) {
      ++skipped;
      EXPECT_EQ(response.target().rotations_size(), 0);
      continue;
    }
    ++answered;
    planted += response.left_foot().planted() + response.right_foot().planted();
  }
  writer.join();
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(answered + skipped, frames);
  EXPECT_EQ(last, static_cast<uint64_t>(frames - 1));
  EXPECT_GT(answered, 0);
  // Whatever was skipped, the feet's speed is measured over the time that
  // passed: slow feet on the floor still plant.
  EXPECT_GT(planted, 0);
}

class RetargetLimitsTest : public RetargetServiceTest {
 protected:
  static ServerOptions Options() {
    ServerOptions options = TestServerOptions();
    options.max_retarget_profiles = 1;
    options.service.max_retarget_frames = 10;
    return options;
  }
  RetargetLimitsTest() : RetargetServiceTest(Options()) {}
};

class RetargetDeadlineTest : public RetargetServiceTest {
 protected:
  static ServerOptions Options() {
    ServerOptions options = TestServerOptions();
    options.service.max_solve = absl::Microseconds(500);
    return options;
  }
  RetargetDeadlineTest() : RetargetServiceTest(Options()) {}
};

// A batch's frames share --max_solve_ms: past it every frame is still
// answered (transferred, its pose whole), but no longer solved.
TEST_F(RetargetDeadlineTest, ABatchsFramesShareTheSolveTime) {
  const std::string id = MustCreate(Spec());
  const v1::RetargetBatchRequest request =
      Batch(id, source_.motion_size() - 1);
  v1::RetargetBatchResponse response;
  const absl::Time start = absl::Now();
  const grpc::Status status =
      retarget_->RetargetBatch(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.frames_size(), request.frames_size());
  const v1::RetargetResponse& last = response.frames(response.frames_size() - 1);
  EXPECT_EQ(last.target().rotations_size(), target_.skeleton().joints_size());
  EXPECT_EQ(last.iterations(), 0);
  EXPECT_FALSE(last.left_hand().reached() && last.right_hand().reached() &&
               last.left_foot().reached() && last.right_foot().reached());
  // Not a timing assertion: the unsolved frames' zero iterations above are
  // the evidence; this only reports.
  std::printf("%d frames in %.1f ms with --max_solve_ms=0.5\n",
              response.frames_size(),
              absl::ToDoubleMilliseconds(absl::Now() - start));
}

class RetargetBytesTest : public RetargetServiceTest {
 protected:
  static ServerOptions Options() {
    ServerOptions options = TestServerOptions();
    options.max_retarget_profile_bytes = 1000;
    return options;
  }
  RetargetBytesTest() : RetargetServiceTest(Options()) {}
};

TEST_F(RetargetBytesTest, ProfilesMemoryHasItsFlag) {
  v1::CreateRetargetProfileResponse response;
  const grpc::Status status = Create(Spec(), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(),
              HasSubstr("--max_retarget_profile_bytes (1000)"));
}

TEST_F(RetargetLimitsTest, EveryLimitHasItsFlag) {
  const std::string id = MustCreate(Spec());
  v1::RetargetProfileSpec other = Spec();
  other.set_no_planting(true);
  v1::CreateRetargetProfileResponse response;
  grpc::Status status = Create(other, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("--max_retarget_profiles"));
  // The same spec again is no new profile: allowed.
  EXPECT_TRUE(Create(Spec(), &response).ok());

  v1::RetargetBatchResponse answers;
  EXPECT_TRUE(
      retarget_->RetargetBatch(Context().get(), Batch(id, 10), &answers).ok());
  status = retarget_->RetargetBatch(Context().get(), Batch(id, 11), &answers);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("--max_retarget_frames"));
}

// A real SQLite file: profiles come back after a restart, and keep working
// after the skeletons they were made from are deleted.
TEST(RetargetPersistenceTest, ProfilesSurviveARestartAndTheirSkeletons) {
  char dir_template[] = "/tmp/reach-retarget-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  ServerOptions options = TestServerOptions();
  options.in_memory_store = false;
  options.data_dir = dir_template;
  std::string id;
  v1::RetargetProfile made;
  v1::RetargetResponse before;
  v1::RetargetRequest frame;
  {
    TestServer server(options);
    auto retarget = v1::RetargetService::NewStub(server.channel);
    std::string ids[2];
    v1::ImportSkeletonResponse source;
    for (int side = 0; side < 2; ++side) {
      const v1::ImportSkeletonResponse response = testing::MustImport(
          *server.stub,
          absl::StrCat(REACH_TEST_DATA, "/", side == 0 ? kSource : kTarget),
          /*motion=*/side == 0);
      ids[side] = response.skeleton_id();
      if (side == 0) source = response;
    }
    v1::CreateRetargetProfileRequest create;
    create.mutable_spec()->mutable_source()->set_skeleton_id(ids[0]);
    create.mutable_spec()->mutable_target()->set_skeleton_id(ids[1]);
    v1::CreateRetargetProfileResponse created;
    ASSERT_TRUE(
        retarget->CreateRetargetProfile(Context().get(), create, &created)
            .ok());
    made = created.profile();
    id = made.profile_id();
    create.mutable_spec()->set_no_planting(true);
    ASSERT_TRUE(
        retarget->CreateRetargetProfile(Context().get(), create, &created)
            .ok());
    EXPECT_NE(created.profile().profile_id(), id);
    frame.set_profile_id(id);
    *frame.mutable_source() = source.motion(50);
    ASSERT_TRUE(retarget->Retarget(Context().get(), frame, &before).ok());
    for (const std::string& skeleton : ids) {
      v1::DeleteSkeletonRequest remove;
      remove.set_skeleton_id(skeleton);
      v1::DeleteSkeletonResponse removed;
      ASSERT_TRUE(
          server.stub->DeleteSkeleton(Context().get(), remove, &removed).ok());
    }
    // Still there with its skeletons gone.
    v1::RetargetResponse after;
    ASSERT_TRUE(retarget->Retarget(Context().get(), frame, &after).ok());
    EXPECT_EQ(PoseDifference(after.target(), before.target()), 0.0);
  }
  // Every acknowledged profile loads, whatever the limit says now.
  options.max_retarget_profiles = 1;
  TestServer server(options);
  EXPECT_EQ(server.server->retarget_profiles().size(), 2);
  auto retarget = v1::RetargetService::NewStub(server.channel);
  v1::GetRetargetProfileRequest get;
  get.set_profile_id(id);
  v1::GetRetargetProfileResponse got;
  ASSERT_TRUE(retarget->GetRetargetProfile(Context().get(), get, &got).ok());
  EXPECT_EQ(got.profile().SerializeAsString(), made.SerializeAsString());
  v1::RetargetResponse after;
  ASSERT_TRUE(retarget->Retarget(Context().get(), frame, &after).ok());
  EXPECT_EQ(PoseDifference(after.target(), before.target()), 0.0);
  std::filesystem::remove_all(dir_template);
}

}  // namespace
}  // namespace reach
