#include "server/retarget_profiles.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "solvers/pose.h"
#include "wire/convert.h"

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

absl::StatusOr<std::unique_ptr<RetargetProfiles>> RetargetProfiles::Create(
    std::unique_ptr<SkeletonStore> store, const RetargetProfileLimits& limits,
    std::vector<std::string>* skipped) {
  absl::StatusOr<std::vector<StoredSkeleton>> records = store->LoadAll();
  if (!records.ok()) return records.status();
  std::unique_ptr<RetargetProfiles> profiles(
      new RetargetProfiles(std::move(store), limits));
  absl::MutexLock write_lock(&profiles->write_mu_);
  absl::MutexLock lock(&profiles->mu_);
  for (StoredSkeleton& record : *records) {
    profiles->next_version_ =
        std::max(profiles->next_version_, record.version + 1);
    const auto skip = [&](absl::string_view why) {
      if (skipped != nullptr) {
        skipped->push_back(absl::StrCat("retarget profile ", record.id, ": ",
                                        why));
      }
    };
    v1::StoredRetargetProfile stored;
    if (!stored.ParseFromString(record.definition)) {
      skip("does not parse");
      continue;
    }
    absl::StatusOr<std::shared_ptr<BuiltRetargetProfile>> built =
        BuildRetargetProfile(stored, limits.skeleton);
    if (!built.ok()) {
      skip(built.status().message());
      continue;
    }
    (*built)->id = record.id;
    (*built)->version = record.version;
    (*built)->description.set_profile_id(record.id);
    (*built)->description.set_version(record.version);
    (*built)->stored_bytes = std::move(record.definition);
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

absl::StatusOr<RetargetProfiles::AddResult> RetargetProfiles::Add(
    const v1::RetargetProfileSpec& requested, const Registry& skeletons,
    absl::string_view owner) {
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
  v1::RetargetProfileSpec spec = requested;
  spec.DiscardUnknownFields();
  CanonicalizeZeros(&spec);
  const std::string id = MessageId(spec);

  // Built outside the write lock (characterisation and alignment take a
  // few milliseconds): only the store and the publication are serialised.
  std::shared_ptr<BuiltRetargetProfile> built;
  if (Find(id) == nullptr) {
    v1::StoredRetargetProfile stored;
    *stored.mutable_spec() = spec;
    for (const auto& [side, field, out] :
         {std::make_tuple(&spec.source(), "spec.source",
                          stored.mutable_source_skeleton()),
          std::make_tuple(&spec.target(), "spec.target",
                          stored.mutable_target_skeleton())}) {
      const std::shared_ptr<const RegisteredSkeleton> skeleton =
          skeletons.Find(side->skeleton_id());
      if (skeleton == nullptr) {
        return Within(field, UnknownSkeleton(side->skeleton_id()));
      }
      if (!out->ParseFromString(skeleton->definition_bytes)) {
        return absl::InternalError(
            absl::StrCat(field, ": the stored skeleton does not parse"));
      }
    }
    absl::StatusOr<std::shared_ptr<BuiltRetargetProfile>> made =
        BuildRetargetProfile(stored, limits_.skeleton);
    if (!made.ok()) return made.status();
    built = *std::move(made);
    built->id = id;
    built->description.set_profile_id(id);
    built->stored_bytes = stored.SerializeAsString();
  }

  absl::MutexLock write_lock(&write_mu_);
  if (std::shared_ptr<const BuiltRetargetProfile> known = Find(id)) {
    // Made before (or meanwhile): `owner` becomes one of its owners.
    std::vector<std::string> owners = OwnersOf(id);
    if (!owner.empty() &&
        std::find(owners.begin(), owners.end(), owner) == owners.end()) {
      owners.emplace_back(owner);
      absl::Status status = store_->SetOwners(id, owners);
      if (!status.ok()) return status;
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
  built->version = next_version_;
  built->description.set_version(built->version);
  StoredSkeleton record;
  record.id = id;
  record.version = built->version;
  record.definition = built->stored_bytes;
  if (!owner.empty()) record.owners.emplace_back(owner);
  absl::Status status = store_->Put(record);
  if (!status.ok()) return status;
  ++next_version_;
  std::shared_ptr<const BuiltRetargetProfile> published = std::move(built);
  {
    absl::MutexLock lock(&mu_);
    Publish(published, std::move(record.owners));
  }
  return AddResult{std::move(published), true};
}

std::shared_ptr<const BuiltRetargetProfile> RetargetProfiles::Find(
    absl::string_view id) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second;
}

absl::Status RetargetProfiles::Delete(absl::string_view id,
                                      absl::string_view owner) {
  absl::MutexLock write_lock(&write_mu_);
  std::shared_ptr<const BuiltRetargetProfile> known = Find(id);
  if (known == nullptr) return UnknownProfile(id);
  std::vector<std::string> owners = OwnersOf(known->id);
  if (!owner.empty()) {
    auto mine = std::find(owners.begin(), owners.end(), owner);
    if (mine == owners.end()) {
      return absl::PermissionDeniedError(absl::StrCat(
          "profile_id: '", ClientString(id), "' was not created by '",
          ClientString(owner),
          "'; deleting another's profile needs the admin role"));
    }
    if (owners.size() > 1) {
      owners.erase(mine);
      absl::Status status = store_->SetOwners(id, owners);
      if (!status.ok()) return status;
      absl::MutexLock lock(&mu_);
      owners_[known->id] = std::move(owners);
      return absl::OkStatus();
    }
  }
  absl::Status status = store_->Delete(id);
  if (!status.ok()) return status;
  absl::MutexLock lock(&mu_);
  owners_.erase(known->id);
  total_bytes_ -= known->memory_bytes;
  by_version_.erase(known->version);
  by_id_.erase(known->id);
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
