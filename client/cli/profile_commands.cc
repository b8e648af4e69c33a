// profiles list | get | delete: the retarget profiles the server keeps
// (reach.v1.RetargetService), which `reach retarget` makes.
#include <cstdio>
#include <memory>
#include <string>

#include "client/cli/common.h"

namespace reach::cli {
namespace {

int RunProfilesList(const Globals& globals, bool json) {
  auto made = MakeClient(globals);
  if (!made.ok()) return FailSetup(made.status());
  auto client = *std::move(made);
  v1::ListRetargetProfilesResponse all;
  std::string token;
  do {
    absl::StatusOr<v1::ListRetargetProfilesResponse> page =
        client->ListRetargetProfiles(100, token);
    if (!page.ok()) return FailRpc(page.status());
    for (v1::RetargetProfileSummary& p : *page->mutable_profiles()) {
      *all.add_profiles() = std::move(p);
    }
    token = page->next_page_token();
  } while (!token.empty());
  if (json) {
    std::printf("%s\n", ToJson(all).c_str());
    return kExitOk;
  }
  std::printf("%-64s  %7s  %s\n", "ID", "VERSION", "SOURCE -> TARGET");
  for (const v1::RetargetProfileSummary& p : all.profiles()) {
    std::printf("%-64s  %7lld  %s (%.12s) -> %s (%.12s)\n",
                p.profile_id().c_str(), static_cast<long long>(p.version()),
                p.source_name().c_str(), p.source_skeleton_id().c_str(),
                p.target_name().c_str(), p.target_skeleton_id().c_str());
  }
  return kExitOk;
}

int RunProfilesGet(const Globals& globals, const std::string& id,
                   bool skeletons) {
  auto made = MakeClient(globals);
  if (!made.ok()) return FailSetup(made.status());
  auto client = *std::move(made);
  absl::StatusOr<v1::GetRetargetProfileResponse> response =
      client->GetRetargetProfile(id, skeletons);
  if (!response.ok()) return FailRpc(response.status());
  std::printf("%s\n", skeletons ? ToJson(*response).c_str()
                                : ToJson(response->profile()).c_str());
  return kExitOk;
}

int RunProfilesDelete(const Globals& globals, const std::string& id) {
  auto made = MakeClient(globals);
  if (!made.ok()) return FailSetup(made.status());
  auto client = *std::move(made);
  if (absl::Status s = client->DeleteRetargetProfile(id); !s.ok()) {
    return FailRpc(s);
  }
  std::printf("deleted %s\n", id.c_str());
  return kExitOk;
}

}  // namespace

void AddProfileCommands(CLI::App& app, const Globals& globals, Command* run) {
  CLI::App* profiles = app.add_subcommand(
      "profiles",
      "Retarget profiles on the server (made by `reach retarget`): list, "
      "get, delete.");
  profiles->require_subcommand(1);

  auto list_json = std::make_shared<bool>(false);
  CLI::App* list =
      profiles->add_subcommand("list", "List the retarget profiles.");
  list->add_flag("--json", *list_json, "Print JSON");
  list->callback([=, &globals] {
    *run = [=, &globals] { return RunProfilesList(globals, *list_json); };
  });

  auto get_id = std::make_shared<std::string>();
  auto get_skeletons = std::make_shared<bool>(false);
  CLI::App* get = profiles->add_subcommand(
      "get", "Print a retarget profile as JSON (its spec, both sides' role "
             "mappings, the pelvis scale, the target's retarget pose).");
  get->add_option("id", *get_id, "Profile id")->required();
  get->add_flag("--skeletons", *get_skeletons,
                "Print the whole response, with the source and target "
                "skeletons the profile keeps");
  get->callback([=, &globals] {
    *run = [=, &globals] {
      return RunProfilesGet(globals, *get_id, *get_skeletons);
    };
  });

  auto delete_id = std::make_shared<std::string>();
  CLI::App* del =
      profiles->add_subcommand("delete", "Delete a retarget profile.");
  del->add_option("id", *delete_id, "Profile id")->required();
  del->callback([=, &globals] {
    *run = [=, &globals] { return RunProfilesDelete(globals, *delete_id); };
  });
}

}  // namespace reach::cli
