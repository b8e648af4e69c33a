#include "server/retarget_profiles.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "solvers/pose.h"
#include "wire/convert.h"
#include "server/log.h"

namespace reach {
namespace {

// `status` with its message prefixed by `field` ("spec.source"), joined by
// "." when the message names a field of it, else by ": ".
absl::Status Within(absl::string_view field, const absl::Status& status) {
  if (status.ok()) return status;
  const absl::string_view message = status.message();
  const bool names_field = !message.empty() && message[0] != ' ' &&
                           message.find(':') != absl::string_view::npos &&
                           message.find(' ') > message.find(':');
  return absl::Status(status.code(),
                      absl::StrCat(field, names_field ? "." : ": ", message));
}

// The options a spec asks for; ranges are checked by the retargeter
// (ValidateRetargetOptions, its "options." names become "spec.").
retarget::RetargetOptions OptionsOf(const v1::RetargetProfileSpec& spec) {
  retarget::RetargetOptions o;
  o.arm_ik = {!spec.no_left_arm_ik(), !spec.no_right_arm_ik()};
  o.leg_ik = {!spec.no_left_leg_ik(), !spec.no_right_leg_ik()};
  o.plant_feet = !spec.no_planting();
  if (spec.has_source_floor()) o.source_floor = spec.source_floor();
  if (spec.contact_height() != 0.0) o.contact_height = spec.contact_height();
  if (spec.contact_speed() != 0.0) o.contact_speed = spec.contact_speed();
  if (spec.has_ankle_height()) o.ankle_height = spec.ankle_height();
  if (spec.has_release_seconds()) o.release_seconds = spec.release_seconds();
  if (spec.max_iterations() != 0) o.max_iterations = spec.max_iterations();
  o.pelvis_scale = spec.pelvis_scale();
  return o;
}

// One side built into `skeleton` / `roles` / `reference`; errors name
// `field` ("spec.source").
absl::Status BuildSide(const v1::Skeleton& definition,
                       const v1::RetargetSideSpec& side,
                       const SkeletonLimits& limits, absl::string_view field,
                       Skeleton* skeleton, retarget::Characterization* roles,
                       Pose* reference) {
  SkeletonDef def;
  absl::Status status = FromProto(definition, &def);
  if (!status.ok()) return Within(absl::StrCat(field, ".skeleton"), status);
  absl::StatusOr<Skeleton> built = Skeleton::Create(std::move(def), limits);
  if (!built.ok()) {
    return Within(absl::StrCat(field, ".skeleton"), built.status());
  }
  *skeleton = *std::move(built);
  if (side.has_reference()) {
    status = FromProto(*skeleton, side.reference(), reference,
                       absl::StrCat(field, ".reference"));
    if (!status.ok()) return status;
  } else {
    *reference = RestPose(*skeleton);
  }
  std::vector<retarget::RoleOverride> overrides;
  overrides.reserve(side.overrides_size());
  for (const v1::RoleOverride& o : side.overrides()) {
    overrides.push_back({o.role(), o.joint()});
  }
  absl::StatusOr<retarget::Characterization> found =
      retarget::Characterize(*skeleton, overrides, reference);
  if (!found.ok()) return Within(field, found.status());
  *roles = *std::move(found);
  return absl::OkStatus();
}

void DescribeSide(const Skeleton& skeleton,
                  const retarget::Characterization& roles,
                  const v1::Skeleton& definition, absl::string_view id,
                  v1::RetargetSideReport* out) {
  out->set_skeleton_id(std::string(id));
  out->set_skeleton_name(definition.name());
  for (const retarget::RoleAssignment& role : roles.roles) {
    v1::RoleMapping* mapping = out->add_roles();
    mapping->set_role(role.role);
    mapping->set_joint(skeleton.joint(role.joint).name);
    mapping->set_decided(std::string(retarget::DecidedName(role.how)));
  }
  for (const int joint : roles.unmapped) {
    out->add_unmapped(skeleton.joint(joint).name);
  }
  for (const std::string& warning : roles.warnings) out->add_warnings(warning);
  ToProto(roles.up, out->mutable_up());
  ToProto(roles.forward, out->mutable_forward());
  ToProto(roles.left, out->mutable_left());
}

}  // namespace

absl::Status UnknownProfile(absl::string_view id) {
  if (id.empty()) return absl::InvalidArgumentError("profile_id: required");
  return absl::NotFoundError(absl::StrCat("profile_id: no retarget profile '",
                                          ClientString(id), "'"));
}

absl::StatusOr<std::shared_ptr<BuiltRetargetProfile>> BuildRetargetProfile(
    const v1::StoredRetargetProfile& stored, const SkeletonLimits& limits) {
  const v1::RetargetProfileSpec& spec = stored.spec();
  auto p = std::make_shared<BuiltRetargetProfile>();
  Pose source_reference, target_reference;
  absl::Status status =
      BuildSide(stored.source_skeleton(), spec.source(), limits, "spec.source",
                &p->source_skeleton, &p->source_roles, &source_reference);
  if (!status.ok()) return status;
  status =
      BuildSide(stored.target_skeleton(), spec.target(), limits, "spec.target",
                &p->target_skeleton, &p->target_roles, &target_reference);
  if (!status.ok()) return status;

  const retarget::RetargetSide source{&p->source_skeleton, &p->source_roles,
                                      std::move(source_reference)};
  retarget::RetargetSide target{&p->target_skeleton, &p->target_roles,
                                std::move(target_reference)};
  if (!spec.keep_target_pose()) {
    absl::StatusOr<Pose> aligned = retarget::AlignLimbs(source, target);
    if (!aligned.ok()) return Within("spec", aligned.status());
    target.reference = *std::move(aligned);
  }
  const retarget::RetargetOptions options = OptionsOf(spec);
  absl::StatusOr<retarget::Retargeter> retargeter =
      retarget::Retargeter::Create(source, target, options);
  if (!retargeter.ok()) {
    status = retargeter.status();
    // The options' names are the spec's.
    if (absl::StartsWith(status.message(), "options.")) {
      return absl::Status(status.code(),
                          absl::StrCat("spec.", status.message().substr(8)));
    }
    return Within("spec", status);
  }
  p->retargeter.emplace(*std::move(retargeter));

  v1::RetargetProfile& d = p->description;
  *d.mutable_spec() = spec;
  DescribeSide(p->source_skeleton, p->source_roles, stored.source_skeleton(),
               spec.source().skeleton_id(), d.mutable_source());
  DescribeSide(p->target_skeleton, p->target_roles, stored.target_skeleton(),
               spec.target().skeleton_id(), d.mutable_target());
  d.set_pelvis_scale(p->retargeter->transfer().pelvis_scale());
  ToProto(p->retargeter->transfer().target_reference(),
          d.mutable_target_reference());
  // Two skeletons each held three times over (definition, Skeleton, the
  // retargeter's solving copy and reference poses), the description.
  const int64_t joints =
      p->source_skeleton.num_joints() + p->target_skeleton.num_joints();
  p->memory_bytes = static_cast<int64_t>(stored.ByteSizeLong()) * 2 +
                    static_cast<int64_t>(d.ByteSizeLong()) * 2 + joints * 1024;
  return p;
}

absl::StatusOr<std::shared_ptr<BuiltRetargetProfile>>
RetargetProfiles::BuildRecord(const StoredSkeleton& record) const {
  v1::StoredRetargetProfile stored;
  if (!stored.ParseFromString(record.definition)) {
    return absl::InternalError("does not parse");
  }
  absl::StatusOr<std::shared_ptr<BuiltRetargetProfile>> built =
      BuildRetargetProfile(stored, limits_.skeleton);
  if (!built.ok()) return built.status();
  (*built)->id = record.id;
  (*built)->version = record.version;
  (*built)->description.set_profile_id(record.id);
  (*built)->description.set_version(record.version);
  (*built)->stored_bytes = record.definition;
  return built;
}

absl::StatusOr<std::unique_ptr<RetargetProfiles>> RetargetProfiles::Create(
    std::unique_ptr<SkeletonStore> store, const RetargetProfileLimits& limits,
    std::vector<std::string>* skipped) {
  absl::StatusOr<StoreSnapshot> snapshot = store->LoadAll();
  if (!snapshot.ok()) return snapshot.status();
  std::unique_ptr<RetargetProfiles> profiles(
      new RetargetProfiles(std::move(store), limits));
  absl::MutexLock write_lock(&profiles->write_mu_);
  profiles->applied_ = snapshot->sequence;
  for (StoredSkeleton& record : snapshot->records) {
    profiles->next_version_ =
        std::max(profiles->next_version_, record.version + 1);
    absl::StatusOr<std::shared_ptr<BuiltRetargetProfile>> built =
        profiles->BuildRecord(record);
    if (!built.ok()) {
      if (skipped != nullptr) {
        skipped->push_back(absl::StrCat("retarget profile ", record.id, ": ",
                                        built.status().message()));
      }
      continue;
    }
    absl::MutexLock lock(&profiles->mu_);
    profiles->Publish(*std::move(built), std::move(record.owners));
  }
  return profiles;
}

void RetargetProfiles::Publish(
    std::shared_ptr<const BuiltRetargetProfile> profile,
    std::vector<std::string> owners) {
  owners_[profile->id] = std::move(owners);
  total_bytes_ += profile->memory_bytes;
  by_version_[profile->version] = profile;
  by_id_[profile->id] = std::move(profile);
}

absl::Status RetargetProfiles::BeginLocked(StoreWrite& write) {
  if (absl::Status status = write.Begin(); !status.ok()) return status;
  // Under the store's write lock: after this, this holds what every server
  // wrote, so its checks (quotas, limits, versions) are exact.
  return FollowStore(*store_, applied_,
                     [&](const StoreChanges& changes) { ApplyLocked(changes); });
}

absl::Status RetargetProfiles::CommitLocked(StoreWrite& write) {
  return CommitAndFollow(write, &applied_);
}

absl::Status RetargetProfiles::CatchUp() {
  absl::MutexLock write_lock(&write_mu_);
  return FollowStore(*store_, applied_,
                     [&](const StoreChanges& changes) { ApplyLocked(changes); });
}

int64_t RetargetProfiles::applied_sequence() const {
  absl::MutexLock write_lock(&write_mu_);
  return applied_;
}

void RetargetProfiles::ApplyLocked(const StoreChanges& changes) {
  if (changes.complete) {
    absl::flat_hash_map<std::string, bool> listed;
    for (const StoreChange& change : changes.changes) listed[change.id] = true;
    std::vector<std::string> gone;
    {
      absl::ReaderMutexLock lock(&mu_);
      for (const auto& entry : by_id_) {
        if (!listed.contains(entry.first)) gone.push_back(entry.first);
      }
    }
    for (const std::string& id : gone) RemoveLocked(id);
  }
  for (const StoreChange& change : changes.changes) {
    ApplyRecordLocked(change.id, change.record);
  }
  applied_ = std::max(applied_, changes.sequence);
}

void RetargetProfiles::ApplyRecordLocked(
    const std::string& id, const std::optional<StoredSkeleton>& record) {
  std::shared_ptr<const BuiltRetargetProfile> known = FindLocal(id);
  if (!record.has_value()) {
    RemoveLocked(id);
    return;
  }
  next_version_ = std::max(next_version_, record->version + 1);
  if (known != nullptr && known->version == record->version) {
    absl::MutexLock lock(&mu_);
    owners_[id] = record->owners;
    return;
  }
  absl::StatusOr<std::shared_ptr<BuiltRetargetProfile>> built =
      BuildRecord(*record);
  if (!built.ok()) {
    LogError(absl::StrCat("retarget profiles: skipped profile ", id,
                          " another server stored: ",
                          built.status().message()));
    return;
  }
  RemoveLocked(id);
  absl::MutexLock lock(&mu_);
  Publish(*std::move(built), record->owners);
}

void RetargetProfiles::RemoveLocked(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return;
  owners_.erase(id);
  total_bytes_ -= it->second->memory_bytes;
  by_version_.erase(it->second->version);
  by_id_.erase(it);
}

namespace {

// `requested` bounded, without unknown fields and with -0.0 as 0.0: what a
// profile's id is the hash of.
absl::Status Canonical(const v1::RetargetProfileSpec& requested,
                       v1::RetargetProfileSpec* spec) {
  // Bounded before anything is copied or built.
  for (const auto& [side, field] :
       {std::make_pair(&requested.source(), "spec.source.overrides"),
        std::make_pair(&requested.target(), "spec.target.overrides")}) {
    if (side->overrides_size() > kMaxRoleOverrides) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": has ", side->overrides_size(),
                       "; at most ", kMaxRoleOverrides));
    }
  }
  if (static_cast<int64_t>(requested.ByteSizeLong()) > kMaxSpecBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec: ", requested.ByteSizeLong(), " bytes; at most ",
                     kMaxSpecBytes));
  }
  *spec = requested;
  spec->DiscardUnknownFields();
  CanonicalizeZeros(spec);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<BuiltRetargetProfile>> RetargetProfiles::Make(
    const v1::RetargetProfileSpec& spec, const Registry& skeletons) const {
  // Built outside the write lock (characterisation and alignment take a
  // few milliseconds): only the store and the publication are serialised.
  v1::StoredRetargetProfile stored;
  *stored.mutable_spec() = spec;
  for (const auto& [side, field, out] :
       {std::make_tuple(&spec.source(), "spec.source",
                        stored.mutable_source_skeleton()),
        std::make_tuple(&spec.target(), "spec.target",
                        stored.mutable_target_skeleton())}) {
    const absl::StatusOr<std::shared_ptr<const LoadedSkeleton>> skeleton =
        skeletons.Get(side->skeleton_id());
    if (!skeleton.ok()) return Within(field, skeleton.status());
    if (!out->ParseFromString((*skeleton)->definition_bytes)) {
      return absl::InternalError(
          absl::StrCat(field, ": the stored skeleton does not parse"));
    }
  }
  absl::StatusOr<std::shared_ptr<BuiltRetargetProfile>> made =
      BuildRetargetProfile(stored, limits_.skeleton);
  if (!made.ok()) return made.status();
  (*made)->stored_bytes = stored.SerializeAsString();
  return made;
}

absl::StatusOr<RetargetProfiles::AddResult> RetargetProfiles::Add(
    const v1::RetargetProfileSpec& requested, const Registry& skeletons,
    absl::string_view owner) {
  v1::RetargetProfileSpec spec;
  if (absl::Status status = Canonical(requested, &spec); !status.ok()) {
    return status;
  }
  const std::string id = MessageId(spec);
  std::shared_ptr<BuiltRetargetProfile> built;
  if (Find(id) == nullptr) {
    absl::StatusOr<std::shared_ptr<BuiltRetargetProfile>> made =
        Make(spec, skeletons);
    if (!made.ok()) return made.status();
    built = *std::move(made);
    built->id = id;
    built->description.set_profile_id(id);
  }

  absl::MutexLock write_lock(&write_mu_);
  StoreWrite write(store_.get());
  if (absl::Status status = BeginLocked(write); !status.ok()) return status;
  if (std::shared_ptr<const BuiltRetargetProfile> known = FindLocal(id)) {
    // Made before (or meanwhile; an update since keeps the id): `owner`
    // becomes one of its owners.
    std::vector<std::string> owners = OwnersOf(id);
    if (!owner.empty() &&
        std::find(owners.begin(), owners.end(), owner) == owners.end()) {
      owners.emplace_back(owner);
      absl::Status status = store_->SetOwners(id, owners);
      if (!status.ok()) return status;
      if (status = CommitLocked(write); !status.ok()) return status;
      absl::MutexLock lock(&mu_);
      owners_[id] = std::move(owners);
    }
    return AddResult{std::move(known), false};
  }
  if (built == nullptr) {
    // Deleted between the two looks: the caller may try again.
    return absl::AbortedError(
        absl::StrCat("profile_id: '", id, "' was deleted while being made"));
  }
  if (limits_.max_profiles > 0 && size() >= limits_.max_profiles) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the server holds its --max_retarget_profiles (",
                     limits_.max_profiles, "); delete a profile first"));
  }
  if (limits_.max_bytes > 0 &&
      total_bytes() + built->memory_bytes > limits_.max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the profile would take the server's profiles to ",
        total_bytes() + built->memory_bytes,
        " bytes, beyond its --max_retarget_profile_bytes (", limits_.max_bytes,
        "); delete a profile first"));
  }
  if (limits_.max_owner_profiles > 0 && !owner.empty()) {
    int owned = 0;
    {
      absl::ReaderMutexLock lock(&mu_);
      for (const auto& entry : owners_) {
        const std::vector<std::string>& owners = entry.second;
        owned += std::find(owners.begin(), owners.end(), owner) !=
                 owners.end();
      }
    }
    if (owned >= limits_.max_owner_profiles) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "'", ClientString(owner), "' owns ", owned,
          " retarget profiles, its --quota_retarget_profiles (",
          limits_.max_owner_profiles, "); delete one of them first"));
    }
  }
  StoredSkeleton record;
  record.id = id;
  record.version = next_version_;
  record.definition = built->stored_bytes;
  if (!owner.empty()) record.owners.emplace_back(owner);
  absl::StatusOr<int64_t> version = store_->Put(record);
  if (!version.ok()) return version.status();
  if (absl::Status status = CommitLocked(write); !status.ok()) return status;
  next_version_ = std::max(next_version_, *version + 1);
  built->version = *version;
  built->description.set_version(*version);
  std::shared_ptr<const BuiltRetargetProfile> published = std::move(built);
  {
    absl::MutexLock lock(&mu_);
    Publish(published, std::move(record.owners));
  }
  return AddResult{std::move(published), true};
}

namespace {

absl::Status StaleVersion(absl::string_view id, int64_t current,
                          int64_t given) {
  return absl::AbortedError(absl::StrCat(
      "version: retarget profile '", ClientString(id), "' is at version ",
      current, ", not ", given,
      ": it changed since it was read (another update came first); read it "
      "again and retry"));
}

absl::Status NotAnOwner(absl::string_view id, absl::string_view owner,
                        absl::string_view what) {
  return absl::PermissionDeniedError(absl::StrCat(
      "profile_id: '", ClientString(id), "' was not created by '",
      ClientString(owner), "'; ", what,
      " another's profile needs the admin role"));
}

}  // namespace

absl::StatusOr<std::shared_ptr<const BuiltRetargetProfile>>
RetargetProfiles::Update(absl::string_view id, int64_t version,
                         const v1::RetargetProfileSpec& requested,
                         const Registry& skeletons, absl::string_view owner) {
  if (id.empty()) return UnknownProfile(id);
  if (version <= 0) {
    return absl::InvalidArgumentError(
        "version: required: the version this update replaces (from "
        "CreateRetargetProfile, GetRetargetProfile or ListRetargetProfiles)");
  }
  v1::RetargetProfileSpec spec;
  if (absl::Status status = Canonical(requested, &spec); !status.ok()) {
    return status;
  }
  const auto check = [&](const BuiltRetargetProfile* known) -> absl::Status {
    if (known == nullptr) return UnknownProfile(id);
    if (!owner.empty()) {
      const std::vector<std::string> owners = OwnersOf(known->id);
      if (std::find(owners.begin(), owners.end(), owner) == owners.end()) {
        return NotAnOwner(id, owner, "updating");
      }
    }
    if (known->version != version) {
      return StaleVersion(id, known->version, version);
    }
    return absl::OkStatus();
  };
  // Cheap refusals before the profile is built.
  if (absl::Status status = check(Find(id).get()); !status.ok()) return status;
  absl::StatusOr<std::shared_ptr<BuiltRetargetProfile>> made =
      Make(spec, skeletons);
  if (!made.ok()) return made.status();
  std::shared_ptr<BuiltRetargetProfile> built = *std::move(made);

  absl::MutexLock write_lock(&write_mu_);
  StoreWrite write(store_.get());
  if (absl::Status status = BeginLocked(write); !status.ok()) return status;
  const std::shared_ptr<const BuiltRetargetProfile> known = FindLocal(id);
  if (absl::Status status = check(known.get()); !status.ok()) return status;
  if (limits_.max_bytes > 0 &&
      total_bytes() - known->memory_bytes + built->memory_bytes >
          limits_.max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the updated profile would take the server's profiles to ",
        total_bytes() - known->memory_bytes + built->memory_bytes,
        " bytes, beyond its --max_retarget_profile_bytes (", limits_.max_bytes,
        ")"));
  }
  StoredSkeleton record;
  record.id = known->id;
  record.version = next_version_;
  record.definition = built->stored_bytes;
  record.owners = OwnersOf(known->id);
  absl::StatusOr<int64_t> stored = store_->Replace(record, version);
  if (absl::IsAborted(stored.status())) {
    // The store's own check (a shared store's row changed under it).
    return StaleVersion(id, known->version + 1, version);
  }
  if (!stored.ok()) return stored.status();
  if (absl::Status status = CommitLocked(write); !status.ok()) return status;
  next_version_ = std::max(next_version_, *stored + 1);
  built->id = known->id;
  built->version = *stored;
  built->description.set_profile_id(known->id);
  built->description.set_version(*stored);
  RemoveLocked(known->id);
  std::shared_ptr<const BuiltRetargetProfile> published = std::move(built);
  absl::MutexLock lock(&mu_);
  Publish(published, std::move(record.owners));
  return published;
}

std::shared_ptr<const BuiltRetargetProfile> RetargetProfiles::FindLocal(
    absl::string_view id) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second;
}

std::shared_ptr<const BuiltRetargetProfile> RetargetProfiles::Find(
    absl::string_view id) const {
  std::shared_ptr<const BuiltRetargetProfile> known = FindLocal(id);
  if (known != nullptr || id.empty() || !reader_->shared()) return known;
  // Read through: a profile another server made that this one has not
  // heard of yet.
  absl::StatusOr<StoreRead> read = reader_->Read(id);
  if (!read.ok()) {
    LogError(absl::StrCat("retarget profiles: cannot read ", ClientString(id),
                          " from the store: ", read.status().message()));
    return nullptr;
  }
  if (!read->record.has_value()) return nullptr;
  RetargetProfiles* self = const_cast<RetargetProfiles*>(this);
  absl::MutexLock write_lock(&self->write_mu_);
  if (read->sequence > applied_) {
    self->ApplyRecordLocked(std::string(id), read->record);
  }
  return FindLocal(id);
}

absl::Status RetargetProfiles::Delete(absl::string_view id,
                                      absl::string_view owner) {
  absl::MutexLock write_lock(&write_mu_);
  StoreWrite write(store_.get());
  if (absl::Status status = BeginLocked(write); !status.ok()) return status;
  std::shared_ptr<const BuiltRetargetProfile> known = FindLocal(id);
  if (known == nullptr) return UnknownProfile(id);
  std::vector<std::string> owners = OwnersOf(known->id);
  if (!owner.empty()) {
    auto mine = std::find(owners.begin(), owners.end(), owner);
    if (mine == owners.end()) return NotAnOwner(id, owner, "deleting");
    if (owners.size() > 1) {
      owners.erase(mine);
      absl::Status status = store_->SetOwners(id, owners);
      if (!status.ok()) return status;
      if (status = CommitLocked(write); !status.ok()) return status;
      absl::MutexLock lock(&mu_);
      owners_[known->id] = std::move(owners);
      return absl::OkStatus();
    }
  }
  absl::Status status = store_->Delete(id);
  if (!status.ok()) return status;
  if (status = CommitLocked(write); !status.ok()) return status;
  RemoveLocked(known->id);
  return absl::OkStatus();
}

absl::StatusOr<RetargetProfilePage> RetargetProfiles::List(
    int page_size, absl::string_view page_token) const {
  int64_t after = 0;
  if (!page_token.empty() &&
      (!absl::SimpleAtoi(page_token, &after) || after < 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_token: '", ClientString(page_token),
                     "' is not a token from ListRetargetProfiles"));
  }
  RetargetProfilePage page;
  absl::ReaderMutexLock lock(&mu_);
  for (auto it = by_version_.upper_bound(after); it != by_version_.end();
       ++it) {
    if (static_cast<int>(page.profiles.size()) == page_size) {
      page.next_page_token = absl::StrCat(page.profiles.back()->version);
      break;
    }
    page.profiles.push_back(it->second);
  }
  return page;
}

std::vector<std::string> RetargetProfiles::OwnersOf(
    const std::string& id) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = owners_.find(id);
  return it == owners_.end() ? std::vector<std::string>{} : it->second;
}

int64_t RetargetProfiles::total_bytes() const {
  absl::ReaderMutexLock lock(&mu_);
  return total_bytes_;
}

int RetargetProfiles::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return static_cast<int>(by_id_.size());
}

}  // namespace reach
