// ImportSkeleton against a real server on loopback: every format from the
// bytes of real files (tests/data), the motion of a BVH clip, overrides,
// and the errors, each naming the file, the element or the field.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "importers/skeleton_file.h"
#include "tests/testing/service.h"

namespace reach {
namespace {

using ::reach::testing::Context;
using ::reach::testing::TestServer;
using ::reach::testing::TestServerOptions;
using ::testing::HasSubstr;

std::string Data(const std::string& name) {
  std::ifstream in(std::string(REACH_TEST_DATA) + "/" + name, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class ImportTest : public ::testing::Test {
 protected:
  grpc::Status Import(const v1::ImportSkeletonRequest& request,
                      v1::ImportSkeletonResponse* response) {
    return server_.stub->ImportSkeleton(Context().get(), request, response);
  }
  v1::ImportSkeletonRequest FileRequest(const std::string& name) {
    v1::ImportSkeletonRequest request;
    request.set_data(Data(name));
    request.set_file_name(name.substr(name.rfind('/') + 1));
    return request;
  }
  // What the client would have registered from the file itself.
  std::string LocalId(const std::string& name) {
    absl::StatusOr<v1::Skeleton> skeleton = import::LoadSkeletonFile(
        std::string(REACH_TEST_DATA) + "/" + name);
    EXPECT_TRUE(skeleton.ok()) << skeleton.status();
    return testing::MustRegister(*server_.stub, *skeleton);
  }

  TestServer server_;
};

TEST_F(ImportTest, BvhWithItsMotion) {
  const std::string name = "mocap/cmu_02_01_walk.bvh";
  v1::ImportSkeletonRequest request = FileRequest(name);
  request.set_return_motion(true);
  v1::ImportSkeletonResponse response;
  ASSERT_TRUE(Import(request, &response).ok());
  EXPECT_TRUE(response.created());
  EXPECT_EQ(response.skeleton().joints_size(), 38);  // 31 joints, 7 End Sites.
  // The same skeleton as the client's own import: the same content id.
  EXPECT_EQ(LocalId(name), response.skeleton_id());

  // The motion, against the file's text read here: the frame count, the
  // frame time and the root's position channels of the first and last
  // frames (the walk's root has Xposition Yposition Zposition first).
  const std::string text = Data(name);
  const std::vector<std::string> lines = absl::StrSplit(text, '\n');
  int frames = -1;
  double frame_time = 0;
  size_t first_frame_line = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::string_view line = absl::StripAsciiWhitespace(lines[i]);
    if (absl::ConsumePrefix(&line, "Frames:")) {
      ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &frames));
    } else if (absl::ConsumePrefix(&line, "Frame Time:")) {
      ASSERT_TRUE(
          absl::SimpleAtod(absl::StripAsciiWhitespace(line), &frame_time));
      first_frame_line = i + 1;
      break;
    }
  }
  ASSERT_GT(frames, 0);
  ASSERT_EQ(response.motion_size(), frames);
  EXPECT_DOUBLE_EQ(response.frame_time_s(), frame_time);
  for (const int f : {0, frames - 1}) {
    const std::vector<std::string> values = absl::StrSplit(
        absl::StripAsciiWhitespace(lines[first_frame_line + f]), ' ',
        absl::SkipWhitespace());
    double x, y, z;
    ASSERT_TRUE(absl::SimpleAtod(values[0], &x));
    ASSERT_TRUE(absl::SimpleAtod(values[1], &y));
    ASSERT_TRUE(absl::SimpleAtod(values[2], &z));
    const v1::Vec3& root = response.motion(f).root_translation();
    EXPECT_NEAR(root.x(), x, 1e-9) << "frame " << f;
    EXPECT_NEAR(root.y(), y, 1e-9) << "frame " << f;
    EXPECT_NEAR(root.z(), z, 1e-9) << "frame " << f;
    ASSERT_EQ(response.motion(f).rotations_size(), 38);
    for (const v1::Quat& q : response.motion(f).rotations()) {
      EXPECT_NEAR(q.w() * q.w() + q.x() * q.x() + q.y() * q.y() + q.z() * q.z(),
                  1.0, 1e-9);
    }
  }
  // Without return_motion, none; importing again registers nothing new.
  request.set_return_motion(false);
  ASSERT_TRUE(Import(request, &response).ok());
  EXPECT_FALSE(response.created());
  EXPECT_EQ(response.motion_size(), 0);
}

// bvh_rest_frame: the Character Creator clip's frame 0 becomes the
// registered skeleton's rest pose (each joint's rest rotation that frame's,
// against the file's own parse here), its motion unchanged; a negative
// frame and one beyond the clip are refused, naming the field.
TEST_F(ImportTest, BvhRestFrame) {
  const std::string name = "mocap/cmu_06_15_shoot_ccrig.bvh";
  v1::ImportSkeletonRequest request = FileRequest(name);
  request.set_return_motion(true);
  v1::ImportSkeletonResponse plain, rested;
  ASSERT_TRUE(Import(request, &plain).ok());
  request.set_bvh_rest_frame(0);
  ASSERT_TRUE(Import(request, &rested).ok());
  EXPECT_TRUE(rested.created());
  EXPECT_NE(rested.skeleton_id(), plain.skeleton_id());
  const absl::StatusOr<import::BvhClip> clip =
      import::ParseBvh(Data(name), name);
  ASSERT_TRUE(clip.ok()) << clip.status();
  Pose first;
  clip->FramePose(0, &first);
  ASSERT_EQ(rested.skeleton().joints_size(),
            static_cast<int>(first.local.size()));
  int turned = 0;
  for (int j = 0; j < rested.skeleton().joints_size(); ++j) {
    const v1::Quat& q = rested.skeleton().joints(j).rest().rotation();
    const Eigen::Quaterniond got(q.w(), q.x(), q.y(), q.z());
    EXPECT_LE(got.angularDistance(first.local[j].rotation), 1e-9) << j;
    turned += got.angularDistance(Eigen::Quaterniond::Identity()) > 1e-3;
  }
  EXPECT_GT(turned, 10);
  ASSERT_EQ(rested.motion_size(), plain.motion_size());
  for (int f = 0; f < plain.motion_size(); f += 50) {
    EXPECT_EQ(rested.motion(f).SerializeAsString(),
              plain.motion(f).SerializeAsString())
        << f;
  }
  request.set_bvh_rest_frame(-1);
  grpc::Status status = Import(request, &rested);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("bvh_rest_frame: -1"));
  request.set_bvh_rest_frame(273);
  status = Import(request, &rested);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("rest_frame 273"));
}

TEST_F(ImportTest, UrdfGltfGlbAndJson) {
  for (const char* name : {"urdf/panda.urdf", "gltf/RiggedFigure.glb",
                           "gltf/arm.gltf"}) {
    v1::ImportSkeletonResponse response;
    const grpc::Status status = Import(FileRequest(name), &response);
    ASSERT_TRUE(status.ok()) << name << ": " << status.error_message();
    EXPECT_EQ(LocalId(name), response.skeleton_id()) << name;
    EXPECT_GT(response.skeleton().joints_size(), 1) << name;
  }
  // The format given instead of an extension; a .glb told by its bytes.
  v1::ImportSkeletonRequest request;
  request.set_data(Data("gltf/RiggedFigure.glb"));
  request.set_format(v1::SKELETON_FORMAT_GLTF);
  v1::ImportSkeletonResponse response;
  ASSERT_TRUE(Import(request, &response).ok());
  // Without a file name there is no stem to name it after: the skin's own
  // name, generic as it is (with one, "RiggedFigure").
  EXPECT_EQ(response.skeleton().name(), "Armature");
  absl::StatusOr<v1::Skeleton> local = import::LoadSkeletonFile(
      std::string(REACH_TEST_DATA) + "/gltf/RiggedFigure.glb");
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->name(), "RiggedFigure");
  local->set_name("Armature");
  EXPECT_EQ(testing::MustRegister(*server_.stub, *local),
            response.skeleton_id());

  // Skeleton JSON with a new name and an added chain.
  request.Clear();
  std::ifstream in(std::string(REACH_EXAMPLES_DIR) + "/humanoid.skeleton.json");
  std::stringstream json;
  json << in.rdbuf();
  request.set_data(json.str());
  request.set_format(v1::SKELETON_FORMAT_JSON);
  request.set_name("renamed");
  v1::Chain* chain = request.add_chains();
  chain->set_name("spine");
  chain->set_root("hips");
  chain->set_tip("head");
  ASSERT_TRUE(Import(request, &response).ok()) << response.DebugString();
  EXPECT_EQ(response.skeleton().name(), "renamed");
  bool found = false;
  for (const v1::Chain& c : response.skeleton().chains()) {
    found |= c.name() == "spine" && c.root() == "hips" && c.tip() == "head";
  }
  EXPECT_TRUE(found);
}

TEST_F(ImportTest, ErrorsNameTheFileTheElementOrTheField) {
  v1::ImportSkeletonResponse response;
  v1::ImportSkeletonRequest request;
  grpc::Status status = Import(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "data: empty");

  request.set_data("HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0\n}\n");
  request.set_file_name("broken.bvh");
  status = Import(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("broken.bvh:5: joint 'Hips': OFFSET"));

  request.set_file_name("mystery.dat");
  status = Import(request, &response);
  EXPECT_THAT(status.error_message(), HasSubstr("format: not given"));

  // A .gltf whose buffer is another file: nothing else is read.
  status = Import(FileRequest("gltf/RiggedFigure.gltf"), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("RiggedFigure0.bin"));

  status = Import(FileRequest("urdf/bad_prismatic.urdf"), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("bad_prismatic.urdf"));

  request = FileRequest("mocap/cmu_02_01_walk.bvh");
  request.set_format(static_cast<v1::SkeletonFormat>(99));
  status = Import(request, &response);
  EXPECT_THAT(status.error_message(), HasSubstr("format: unknown value 99"));
}

TEST(ImportLimitsTest, AMotionTooLargeForAResponseIsRefusedBeforeRegistering) {
  ServerOptions options = TestServerOptions();
  options.service.max_response_bytes = 100000;
  TestServer server(options);
  v1::ImportSkeletonRequest request;
  request.set_data(Data("mocap/cmu_02_01_walk.bvh"));
  request.set_file_name("walk.bvh");
  request.set_return_motion(true);
  v1::ImportSkeletonResponse response;
  const grpc::Status status =
      server.stub->ImportSkeleton(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("--max_response_bytes"));
  v1::ListSkeletonsResponse list;
  ASSERT_TRUE(server.stub
                  ->ListSkeletons(Context().get(), v1::ListSkeletonsRequest(),
                                  &list)
                  .ok());
  EXPECT_EQ(list.skeletons_size(), 0);
}

// Issue 39, 2: imports were outside every bound (four 3 MB glTF imports
// at once took 1.15 GB). An import is charged on its caller's share of the
// byte budget before it is parsed, and parsed on a solver thread.
TEST(ImportLimitsTest, AnImportCountsInTheByteBudgetBeforeItIsParsed) {
  const std::string walk = Data("mocap/cmu_02_01_walk.bvh");
  ServerOptions options = TestServerOptions();
  // A share that the walk's parse (8 bytes per byte of it) does not fit.
  options.service.max_buffered_bytes = 4 * 4 * int64_t(walk.size());
  TestServer server(options);
  v1::ImportSkeletonRequest request;
  request.set_data(walk);
  request.set_file_name("walk.bvh");
  v1::ImportSkeletonResponse response;
  grpc::Status status =
      server.stub->ImportSkeleton(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(),
              HasSubstr("--max_buffered_bytes_per_caller"));
  // Its bytes are given back: with room, the same import goes through.
  TestServer roomy(TestServerOptions());
  status = roomy.stub->ImportSkeleton(Context().get(), request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  for (int i = 0; i < 500 && roomy.server->service().budget().used() != 0;
       ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(roomy.server->service().budget().used(), 0);

  // glTF is charged more (tinygltf's model takes up to ~31 bytes per byte
  // within the importers' limits): a share of 16 bytes per byte of the
  // file is not enough.
  const std::string glb = Data("gltf/RiggedFigure.glb");
  options.service.max_buffered_bytes = 4 * 16 * int64_t(glb.size());
  TestServer small(options);
  request.set_data(glb);
  request.set_file_name("RiggedFigure.glb");
  status = small.stub->ImportSkeleton(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  status = roomy.stub->ImportSkeleton(Context().get(), request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

}  // namespace
}  // namespace reach
