// Writes the seed inputs of the proto fuzz targets from real data, into
// CORPUS_DIR/<target>/seed-*: scripts/fuzz --seed runs it (the importer
// seeds are copied from tests/data by the script itself).
//
//   solve_request  0xFF + a SolveRequest: examples/full_body.request.json,
//                  and on each fixture rig (fuzz_support.h) a goal on each
//                  chain with each solver, a full-body request over every
//                  chain, requests with a start pose, globals, a warm start
//   skeleton       the fixture rigs and skeletons imported from
//                  tests/data (BVH, URDF, glTF) and bench/data, serialized
//   batch_wire     SolveBatchRequests of the solve_request seeds: one
//                  skeleton per batch, per item, an unknown field, a bad item
//
//   fuzz_seeds CORPUS_DIR
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "importers/skeleton_file.h"
#include "google/protobuf/unknown_field_set.h"
#include "google/protobuf/util/json_util.h"
#include "wire/convert.h"
#include "server/registry.h"
#include "server/skeleton_store.h"
#include "solvers/pose.h"
#include "tests/fuzz/fuzz_support.h"

namespace reach::fuzz {
namespace {

void Write(const std::string& dir, const std::string& name,
           const std::string& bytes) {
  const std::string path = absl::StrCat(dir, "/seed-", name);
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  REACH_FUZZ_CHECK(out.good(), path);
}

std::string RawRequest(const v1::SolveRequest& request) {
  return absl::StrCat("\xff", request.SerializeAsString());
}

// Requests on one registered fixture: a goal per chain and solver near the
// chain tip's rest position, and the whole-body variants.
std::vector<v1::SolveRequest> Requests(const LoadedSkeleton& registered) {
  const Skeleton& skeleton = registered.skeleton;
  std::vector<Transform> rest(skeleton.num_joints());
  ComputeGlobals(skeleton, RestPose(skeleton), absl::MakeSpan(rest));
  const auto goal_on = [&](int chain, v1::Solver solver, v1::Goal* goal) {
    goal->set_chain(skeleton.chain(chain).name);
    goal->set_solver(solver);
    const Eigen::Vector3d tip =
        rest[skeleton.chain(chain).joints.back()].translation;
    goal->mutable_target()->set_x(tip.x() + 0.05);
    goal->mutable_target()->set_y(tip.y() + 0.1);
    goal->mutable_target()->set_z(tip.z() - 0.05);
    goal->mutable_options()->set_max_iterations(32);
  };
  std::vector<v1::SolveRequest> out;
  for (int c = 0; c < skeleton.num_chains(); ++c) {
    for (int s = v1::SOLVER_AUTO; s <= v1::SOLVER_FULL_BODY; ++s) {
      v1::SolveRequest& request = out.emplace_back();
      request.set_skeleton_id(registered.id);
      request.set_sequence(out.size());
      goal_on(c, static_cast<v1::Solver>(s), request.add_goals());
    }
  }
  v1::SolveRequest full_body;
  full_body.set_skeleton_id(registered.id);
  for (int c = 0; c < skeleton.num_chains(); ++c) {
    v1::Goal* goal = full_body.add_goals();
    goal_on(c, v1::SOLVER_FULL_BODY, goal);
    goal->mutable_options()->clear_max_iterations();
    goal->set_priority(c % 2);
  }
  full_body.mutable_full_body()->set_max_iterations(16);
  out.push_back(full_body);

  v1::SolveRequest posed = out.front();
  Pose pose = RestPose(skeleton);
  pose.local[0].translation.x() += 0.1;
  ToProto(pose, posed.mutable_start_pose());
  posed.set_return_globals(true);
  out.push_back(posed);

  v1::SolveRequest warm = out.front();
  warm.set_latest_wins(true);
  v1::Goal* oriented = warm.mutable_goals(0);
  oriented->mutable_target_orientation()->set_w(1.0);
  oriented->mutable_pole()->set_z(1.0);
  oriented->set_weight(0.5);
  out.push_back(warm);
  return out;
}

void ReadJson(const std::string& path, google::protobuf::Message* out) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const auto status = google::protobuf::util::JsonStringToMessage(text.str(), out);
  REACH_FUZZ_CHECK(in.good() && status.ok(), path);
}

int Main(const std::string& corpus) {
  const std::string source = REACH_SOURCE_DIR;
  absl::StatusOr<std::unique_ptr<Registry>> registry =
      Registry::Create(NewMemoryStore(), SkeletonLimits{});
  REACH_FUZZ_CHECK(registry.ok(), "registry");

  // skeleton: the fixtures and imported rigs.
  const std::string skeleton_dir = absl::StrCat(corpus, "/skeleton");
  std::vector<std::shared_ptr<const LoadedSkeleton>> fixtures;
  for (const v1::Skeleton& skeleton : FixtureSkeletons()) {
    const absl::StatusOr<RegisterResult> result =
        (*registry)->Register(skeleton);
    REACH_FUZZ_CHECK(result.ok(), result.status().ToString());
    fixtures.push_back((*registry)->Load(result->id));
    Write(skeleton_dir, absl::StrCat("fixture-", fixtures.size()),
          skeleton.SerializeAsString());
  }
  for (const char* file :
       {"tests/data/mocap/cmu_02_01_walk.bvh", "tests/data/urdf/panda.urdf",
        "tests/data/urdf/turret.urdf", "tests/data/gltf/RiggedFigure.glb",
        "tests/data/gltf/arm.gltf", "bench/data/bcn_epileptic.skeleton.json"}) {
    const absl::StatusOr<v1::Skeleton> skeleton =
        import::LoadSkeletonFile(absl::StrCat(source, "/", file));
    REACH_FUZZ_CHECK(skeleton.ok(), skeleton.status().ToString());
    std::string name = file;
    name = name.substr(name.rfind('/') + 1);
    Write(skeleton_dir, absl::StrCat("from-", name), skeleton->SerializeAsString());
  }

  // solve_request: the example, then every fixture's requests.
  const std::string solve_dir = absl::StrCat(corpus, "/solve_request");
  v1::SolveRequest example;
  ReadJson(absl::StrCat(source, "/examples/full_body.request.json"), &example);
  example.set_skeleton_id(fixtures[0]->id);
  Write(solve_dir, "full_body.request", RawRequest(example));
  std::vector<std::vector<v1::SolveRequest>> requests;
  for (size_t f = 0; f < fixtures.size(); ++f) {
    requests.push_back(Requests(*fixtures[f]));
    for (size_t r = 0; r < requests[f].size(); ++r) {
      Write(solve_dir, absl::StrFormat("fixture-%d-%02d", f + 1, r),
            RawRequest(requests[f][r]));
    }
  }

  // batch_wire: batches of those requests.
  const std::string batch_dir = absl::StrCat(corpus, "/batch_wire");
  for (size_t f = 0; f < fixtures.size(); ++f) {
    v1::SolveBatchRequest batch;
    batch.set_skeleton_id(fixtures[f]->id);
    for (size_t r = 0; r < requests[f].size() && r < 6; ++r) {
      v1::SolveRequest* item = batch.add_items();
      *item = requests[f][r];
      item->clear_skeleton_id();
    }
    Write(batch_dir, absl::StrCat("fixture-", f + 1), batch.SerializeAsString());
  }
  v1::SolveBatchRequest mixed;
  for (size_t f = 0; f < fixtures.size(); ++f) {
    *mixed.add_items() = requests[f].back();
  }
  mixed.add_items()->set_skeleton_id("no such skeleton");
  std::string mixed_bytes = mixed.SerializeAsString();
  Write(batch_dir, "mixed", mixed_bytes);
  google::protobuf::UnknownFieldSet unknown;
  unknown.AddVarint(7, 12345);
  unknown.AddFixed64(8, 99);
  unknown.AddLengthDelimited(1, "\x08\x01\x22");  // An item that does not parse.
  unknown.AddGroup(11)->AddVarint(1, 2);
  std::string extra;
  unknown.SerializeToString(&extra);
  Write(batch_dir, "unknown-fields", mixed_bytes + extra);
  return 0;
}

}  // namespace
}  // namespace reach::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  return reach::fuzz::Main(argv[1]);
}
