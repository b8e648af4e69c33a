// register, list, get, delete, health.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli/common.h"
#include "importers/chains.h"
#include "importers/import_error.h"

namespace reach::cli {
namespace {

struct RegisterFlags {
  std::string file;
  std::string name;
  std::vector<std::string> chains;
  int skin = 0;
  int rest_frame = -1;
  bool json = false;
  bool print = false;
  bool on_server = false;
};

// `register --on-server`: the server imports the file's bytes.
int RunImportOnServer(const Globals& globals, const RegisterFlags& flags,
                      const import::SkeletonFileOptions& options) {
  v1::ImportSkeletonRequest request;
  if (absl::Status s = import::ReadFile(flags.file, request.mutable_data());
      !s.ok()) {
    return Fail(s, kExitFileError);
  }
  const size_t slash = flags.file.rfind('/');
  request.set_file_name(slash == std::string::npos
                            ? flags.file
                            : flags.file.substr(slash + 1));
  request.set_name(options.name);
  request.set_gltf_skin(options.gltf_skin);
  if (options.bvh_rest_frame >= 0) {
    request.set_bvh_rest_frame(options.bvh_rest_frame);
  }
  for (const ChainDef& chain : options.chains) {
    v1::Chain* out = request.add_chains();
    out->set_name(chain.name);
    out->set_root(chain.root);
    out->set_tip(chain.tip);
  }
  auto made = MakeClient(globals);
  if (!made.ok()) return FailSetup(made.status());
  absl::StatusOr<v1::ImportSkeletonResponse> response =
      (*made)->ImportSkeleton(request);
  if (!response.ok()) return FailRpc(response.status());
  if (flags.json) {
    std::printf("%s\n", ToJson(*response).c_str());
    return kExitOk;
  }
  std::vector<std::string> chains;
  for (const v1::Chain& c : response->skeleton().chains()) {
    chains.push_back(c.name());
  }
  std::printf("%s %s: %d joints, chains [%s], version %lld (imported by the "
              "server)\n",
              response->created() ? "registered" : "already registered",
              response->skeleton_id().c_str(),
              response->skeleton().joints_size(),
              absl::StrJoin(chains, ", ").c_str(),
              static_cast<long long>(response->version()));
  return kExitOk;
}

int RunRegister(const Globals& globals, const RegisterFlags& flags) {
  import::SkeletonFileOptions options;
  options.name = flags.name;
  options.gltf_skin = flags.skin;
  options.bvh_rest_frame = flags.rest_frame;
  for (const std::string& spec : flags.chains) {
    absl::StatusOr<ChainDef> chain = import::ParseChainSpec(spec);
    if (!chain.ok()) return Fail(chain.status(), kExitUsage);
    options.chains.push_back(*std::move(chain));
  }
  if (flags.on_server) return RunImportOnServer(globals, flags, options);
  absl::StatusOr<v1::Skeleton> skeleton =
      import::LoadSkeletonFile(flags.file, options);
  if (!skeleton.ok()) return Fail(skeleton.status(), kExitFileError);
  if (flags.print) {
    std::printf("%s\n", ToJson(*skeleton).c_str());
    return kExitOk;
  }
  auto made = MakeClient(globals);
  if (!made.ok()) return FailSetup(made.status());
  auto client = *std::move(made);
  absl::StatusOr<v1::RegisterSkeletonResponse> response =
      client->Register(*skeleton);
  if (!response.ok()) return FailRpc(response.status());
  if (flags.json) {
    std::printf("%s\n", ToJson(*response).c_str());
  } else {
    std::vector<std::string> chains;
    for (const v1::Chain& c : skeleton->chains()) chains.push_back(c.name());
    std::printf("%s %s: %d joints, chains [%s], version %lld\n",
                response->created() ? "registered" : "already registered",
                response->skeleton_id().c_str(), skeleton->joints_size(),
                absl::StrJoin(chains, ", ").c_str(),
                static_cast<long long>(response->version()));
  }
  return kExitOk;
}

int RunList(const Globals& globals, bool json) {
  auto made = MakeClient(globals);
  if (!made.ok()) return FailSetup(made.status());
  auto client = *std::move(made);
  v1::ListSkeletonsResponse all;
  std::string token;
  do {
    absl::StatusOr<v1::ListSkeletonsResponse> page =
        client->ListSkeletons(100, token);
    if (!page.ok()) return FailRpc(page.status());
    for (v1::SkeletonSummary& s : *page->mutable_skeletons()) {
      *all.add_skeletons() = std::move(s);
    }
    token = page->next_page_token();
  } while (!token.empty());
  if (json) {
    std::printf("%s\n", ToJson(all).c_str());
    return kExitOk;
  }
  std::printf("%-64s  %-20s %6s  %s\n", "ID", "NAME", "JOINTS", "CHAINS");
  for (const v1::SkeletonSummary& s : all.skeletons()) {
    std::printf("%-64s  %-20s %6d  %s\n", s.skeleton_id().c_str(),
                s.name().c_str(), s.joint_count(),
                absl::StrJoin(s.chains(), ",").c_str());
  }
  return kExitOk;
}

int RunGet(const Globals& globals, const std::string& id, bool json) {
  auto made = MakeClient(globals);
  if (!made.ok()) return FailSetup(made.status());
  auto client = *std::move(made);
  absl::StatusOr<v1::GetSkeletonResponse> response =
      client->GetSkeleton(id);
  if (!response.ok()) return FailRpc(response.status());
  // The skeleton alone is a file `reach register` reads back.
  std::printf("%s\n", json ? ToJson(*response).c_str()
                           : ToJson(response->skeleton()).c_str());
  return kExitOk;
}

int RunDelete(const Globals& globals, const std::string& id) {
  auto made = MakeClient(globals);
  if (!made.ok()) return FailSetup(made.status());
  auto client = *std::move(made);
  if (absl::Status s = client->DeleteSkeleton(id); !s.ok()) {
    return FailRpc(s);
  }
  std::printf("deleted %s\n", id.c_str());
  return kExitOk;
}

int RunHealth(const Globals& globals, const std::string& service) {
  auto made = MakeClient(globals);
  if (!made.ok()) return FailSetup(made.status());
  auto client = *std::move(made);
  auto status = client->Health(service);
  if (!status.ok()) return FailRpc(status.status());
  const std::string name =
      grpc::health::v1::HealthCheckResponse::ServingStatus_Name(*status);
  std::printf("%s\n", name.c_str());
  return *status == grpc::health::v1::HealthCheckResponse::SERVING
             ? kExitOk
             : kExitNotServing;
}

}  // namespace

void AddRegistryCommands(CLI::App& app, const Globals& globals, Command* run) {
  auto flags = std::make_shared<RegisterFlags>();
  CLI::App* reg = app.add_subcommand(
      "register",
      "Register a skeleton file: .json (reach.v1.Skeleton), .bvh, .urdf, "
      ".gltf or .glb. Prints its id.");
  reg->add_option("file", flags->file, "Skeleton file")->required();
  reg->add_option("--name", flags->name, "Name to register under");
  reg->add_option("--chain", flags->chains,
                  "Add or replace a chain: NAME=ROOT:TIP (NAME=ROOT,TIP when "
                  "names hold ':'; repeatable)");
  reg->add_option("--skin", flags->skin, "glTF: which skin")
      ->check(NonNegative());
  reg->add_option("--rest-frame", flags->rest_frame,
                  "BVH: the frame (from 0) whose pose becomes the rest pose, "
                  "for a clip whose all-zero pose does not stand (a "
                  "Character Creator export); the full-body solver reads "
                  "posture and knee and elbow bends from the rest pose")
      ->check(NonNegative());
  reg->add_flag("--json", flags->json, "Print the response as JSON");
  reg->add_flag("--print", flags->print,
                "Print the imported skeleton as JSON instead of registering");
  reg->add_flag("--on-server", flags->on_server,
                "Send the file's bytes and let the server import it "
                "(ImportSkeleton; glTF buffers must be embedded)")
      ->excludes("--print");
  reg->callback([=, &globals] { *run = [=, &globals] {
    return RunRegister(globals, *flags);
  }; });

  auto list_json = std::make_shared<bool>(false);
  CLI::App* list = app.add_subcommand("list", "List registered skeletons.");
  list->add_flag("--json", *list_json, "Print JSON");
  list->callback([=, &globals] {
    *run = [=, &globals] { return RunList(globals, *list_json); };
  });

  auto id = std::make_shared<std::string>();
  auto get_json = std::make_shared<bool>(false);
  CLI::App* get = app.add_subcommand(
      "get", "Print a registered skeleton as JSON (a file `register` reads).");
  get->add_option("id", *id, "Skeleton id")->required();
  get->add_flag("--json", *get_json,
                "Print the whole response (id, version, skeleton)");
  get->callback([=, &globals] {
    *run = [=, &globals] { return RunGet(globals, *id, *get_json); };
  });

  auto delete_id = std::make_shared<std::string>();
  CLI::App* del = app.add_subcommand("delete", "Delete a registered skeleton.");
  del->add_option("id", *delete_id, "Skeleton id")->required();
  del->callback([=, &globals] {
    *run = [=, &globals] { return RunDelete(globals, *delete_id); };
  });

  auto service = std::make_shared<std::string>();
  CLI::App* health = app.add_subcommand(
      "health",
      "Check grpc.health.v1; exit 0 only when SERVING (for Docker "
      "HEALTHCHECK and Kubernetes probes).");
  health->add_option("--service", *service,
                     "Service name (default: the whole server)");
  health->callback([=, &globals] {
    *run = [=, &globals] { return RunHealth(globals, *service); };
  });
}

}  // namespace reach::cli
