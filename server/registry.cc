#include "server/registry.h"

#include <algorithm>
#include <cmath>

#include <openssl/sha.h>

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "wire/convert.h"
#include "server/log.h"

namespace reach {

absl::Status UnknownSkeleton(absl::string_view id) {
  if (id.empty()) return absl::InvalidArgumentError("skeleton_id: required");
  return absl::NotFoundError(
      absl::StrCat("skeleton_id: no skeleton '", ClientString(id), "'"));
}

// Rewrites every -0.0 as +0.0: they are equal, but serialise differently,
// and the JSON form does not keep the sign of zero, so a skeleton read back
// from `reach get` would otherwise hash to another id.
void CanonicalizeZeros(google::protobuf::Message* message) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* reflection = message->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(*message, &fields);
  for (const FieldDescriptor* field : fields) {
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
      if (field->is_repeated()) {
        for (int i = 0; i < reflection->FieldSize(*message, field); ++i) {
          if (reflection->GetRepeatedDouble(*message, field, i) == 0.0) {
            reflection->SetRepeatedDouble(message, field, i, 0.0);
          }
        }
      } else if (reflection->GetDouble(*message, field) == 0.0) {
        reflection->SetDouble(message, field, 0.0);
      }
    } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (field->is_repeated()) {
        for (int i = 0; i < reflection->FieldSize(*message, field); ++i) {
          CanonicalizeZeros(reflection->MutableRepeatedMessage(message, field, i));
        }
      } else {
        CanonicalizeZeros(reflection->MutableMessage(message, field));
      }
    }
  }
}

std::string MessageId(const google::protobuf::MessageLite& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
         digest);
  return absl::BytesToHexString(absl::string_view(
      reinterpret_cast<const char*>(digest), SHA256_DIGEST_LENGTH));
}

std::string SkeletonId(const v1::Skeleton& definition) {
  v1::Skeleton canonical = definition;
  CanonicalizeZeros(&canonical);
  return MessageId(canonical);
}

namespace {

// InvalidArgument naming the first name longer than `max_bytes`.
absl::Status CheckNames(const v1::Skeleton& definition, int max_bytes) {
  const auto check = [max_bytes](const std::string& name,
                                 const auto&... field) -> absl::Status {
    if (static_cast<int>(name.size()) <= max_bytes) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat(field..., ": ", name.size(), " bytes; the limit is ",
                     max_bytes, " (--max_name_bytes)"));
  };
  absl::Status status = check(definition.name(), "name");
  for (int i = 0; status.ok() && i < definition.joints_size(); ++i) {
    status = check(definition.joints(i).name(), "joints[", i, "].name");
  }
  for (int i = 0; status.ok() && i < definition.chains_size(); ++i) {
    const v1::Chain& chain = definition.chains(i);
    status = check(chain.name(), "chains[", i, "].name");
    if (status.ok()) status = check(chain.root(), "chains[", i, "].root");
    if (status.ok()) status = check(chain.tip(), "chains[", i, "].tip");
  }
  return status;
}

// About what a registered skeleton takes: its stored bytes, names and the
// entry itself (what the limits count; the definition is held only while
// the skeleton is cached).
int64_t MemoryBytes(const RegisteredSkeleton& entry) {
  int64_t bytes = sizeof(RegisteredSkeleton) + entry.id.capacity() +
                  entry.definition_size + entry.name.capacity() +
                  entry.chain_names.capacity() * sizeof(std::string);
  for (const std::string& chain : entry.chain_names) bytes += chain.capacity();
  return bytes;
}

// About what a loaded Skeleton holds: its joints, rest transforms, the
// per-joint tables and names.
int64_t MemoryBytes(const LoadedSkeleton& loaded) {
  const Skeleton& skeleton = loaded.skeleton;
  int64_t bytes = sizeof(LoadedSkeleton) + loaded.id.capacity() +
                  loaded.definition_bytes.capacity();
  bytes += skeleton.num_joints() *
           static_cast<int64_t>(sizeof(Joint) + 4 * sizeof(Transform));
  for (const Joint& joint : skeleton.joints()) {
    // The name, and again as the name index's key.
    bytes += 2 * joint.name.capacity();
  }
  for (int i = 0; i < skeleton.num_chains(); ++i) {
    const Chain& chain = skeleton.chain(i);
    bytes += static_cast<int64_t>(sizeof(Chain)) + chain.name.capacity() +
             static_cast<int64_t>(chain.joints.capacity() * sizeof(int));
  }
  return bytes;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Registry>> Registry::Create(
    std::unique_ptr<SkeletonStore> store, const RegistryLimits& limits,
    std::vector<std::string>* skipped) {
  absl::StatusOr<StoreSnapshot> snapshot = store->LoadAll();
  if (!snapshot.ok()) return snapshot.status();
  std::unique_ptr<Registry> registry(new Registry(std::move(store), limits));
  absl::MutexLock write_lock(&registry->write_mu_);
  registry->applied_ = snapshot->sequence;
  absl::MutexLock lock(&registry->mu_);
  for (StoredSkeleton& record : snapshot->records) {
    registry->next_version_ =
        std::max(registry->next_version_, record.version + 1);
    v1::Skeleton definition;
    if (!definition.ParseFromString(record.definition)) {
      if (skipped != nullptr) {
        skipped->push_back(absl::StrCat(record.id, ": unparsable definition"));
      }
      continue;
    }
    absl::StatusOr<std::shared_ptr<const RegisteredSkeleton>> built =
        registry->Build(definition,
                        static_cast<int64_t>(record.definition.size()),
                        record.id, record.version);
    // The definition is read again when a call needs it (Get).
    std::string().swap(record.definition);
    absl::Status status = built.status();
    if (status.ok()) status = registry->CheckRoom(**built);
    if (!status.ok()) {
      if (skipped != nullptr) {
        skipped->push_back(absl::StrCat(record.id, ": ", status.message()));
      }
      continue;
    }
    registry->Publish(*std::move(built), std::move(record.owners));
  }
  return registry;
}

absl::Status Registry::BeginLocked(StoreWrite& write) {
  if (absl::Status status = write.Begin(); !status.ok()) return status;
  // Under the store's write lock: after this, this holds what every server
  // wrote, so its checks (quotas, limits, versions) are exact.
  return FollowStore(*store_, applied_,
                     [&](const StoreChanges& changes) { ApplyLocked(changes); });
}

absl::Status Registry::CommitLocked(StoreWrite& write) {
  return CommitAndFollow(write, &applied_);
}

absl::Status Registry::CatchUp() {
  absl::MutexLock write_lock(&write_mu_);
  return FollowStore(*store_, applied_,
                     [&](const StoreChanges& changes) { ApplyLocked(changes); });
}

int64_t Registry::applied_sequence() const {
  absl::MutexLock write_lock(&write_mu_);
  return applied_;
}

void Registry::ApplyLocked(const StoreChanges& changes) {
  if (changes.complete) {
    // Everything the store holds: what is not among it is gone.
    absl::flat_hash_map<std::string, bool> listed;
    for (const StoreChange& change : changes.changes) listed[change.id] = true;
    std::vector<std::shared_ptr<const RegisteredSkeleton>> gone;
    {
      absl::ReaderMutexLock lock(&mu_);
      for (const auto& [id, known] : by_id_) {
        if (!listed.contains(id)) gone.push_back(known);
      }
    }
    for (const auto& known : gone) RemoveLocked(*known);
  }
  for (const StoreChange& change : changes.changes) {
    ApplyRecordLocked(change.id, change.record);
  }
  applied_ = std::max(applied_, changes.sequence);
}

void Registry::ApplyRecordLocked(const std::string& id,
                                 const std::optional<StoredSkeleton>& record) {
  std::shared_ptr<const RegisteredSkeleton> known = FindLocal(id);
  if (!record.has_value()) {
    if (known != nullptr) RemoveLocked(*known);
    return;
  }
  next_version_ = std::max(next_version_, record->version + 1);
  if (known != nullptr && known->version == record->version) {
    if (Owners(id) != record->owners) SetOwnersLocked(*known, record->owners);
    return;
  }
  if (known != nullptr) RemoveLocked(*known);
  v1::Skeleton definition;
  absl::StatusOr<std::shared_ptr<const RegisteredSkeleton>> built =
      definition.ParseFromString(record->definition)
          ? Build(definition, static_cast<int64_t>(record->definition.size()),
                  id, record->version)
          : absl::InternalError("unparsable definition");
  absl::Status status = built.status();
  absl::MutexLock lock(&mu_);
  if (status.ok()) status = CheckRoom(**built);
  if (!status.ok()) {
    LogError(absl::StrCat("registry: skipped skeleton ", id,
                          " another server registered: ", status.message()));
    return;
  }
  Publish(*std::move(built), record->owners);
}

void Registry::RemoveLocked(const RegisteredSkeleton& known) {
  {
    absl::MutexLock lock(&mu_);
    auto it = by_id_.find(known.id);
    if (it == by_id_.end()) return;
    const std::shared_ptr<const RegisteredSkeleton> entry = it->second;
    total_bytes_ -= entry->memory_bytes;
    if (auto owners = owners_.find(entry->id); owners != owners_.end()) {
      for (const std::string& former : owners->second) {
        Charge(former, -1, entry->memory_bytes);
      }
      owners_.erase(owners);
    }
    by_version_.erase(entry->version);
    by_id_.erase(it);
  }
  // After the entry is gone (and outside mu_: Load takes cache_mu_, then
  // mu_): a Load that finds the entry caches before this, one that does
  // not never caches.
  Uncache(known.id);
}

void Registry::SetOwnersLocked(const RegisteredSkeleton& known,
                               std::vector<std::string> owners) {
  absl::MutexLock lock(&mu_);
  if (auto it = owners_.find(known.id); it != owners_.end()) {
    for (const std::string& former : it->second) {
      Charge(former, -1, known.memory_bytes);
    }
  }
  for (const std::string& owner : owners) {
    Charge(owner, +1, known.memory_bytes);
  }
  if (owners.empty()) {
    owners_.erase(known.id);
  } else {
    owners_[known.id] = std::move(owners);
  }
}

absl::StatusOr<Skeleton> Registry::Validate(
    const v1::Skeleton& definition) const {
  absl::Status status = CheckNames(definition, limits_.max_name_bytes);
  if (!status.ok()) return status;
  SkeletonDef def;
  status = FromProto(definition, &def);
  if (!status.ok()) return status;
  return Skeleton::Create(std::move(def), limits_.skeleton);
}

absl::StatusOr<std::shared_ptr<const RegisteredSkeleton>> Registry::Build(
    const v1::Skeleton& definition, int64_t definition_size, std::string id,
    int64_t version) const {
  absl::StatusOr<Skeleton> skeleton = Validate(definition);
  if (!skeleton.ok()) return skeleton.status();
  auto out = std::make_shared<RegisteredSkeleton>();
  out->id = std::move(id);
  out->version = version;
  out->definition_size = definition_size;
  out->name = definition.name();
  out->num_joints = skeleton->num_joints();
  out->chain_names.reserve(skeleton->num_chains());
  for (int c = 0; c < skeleton->num_chains(); ++c) {
    out->chain_names.push_back(skeleton->chain(c).name);
  }
  out->memory_bytes = MemoryBytes(*out);
  return std::shared_ptr<const RegisteredSkeleton>(std::move(out));
}

absl::StatusOr<std::shared_ptr<const LoadedSkeleton>> Registry::Get(
    absl::string_view id) const {
  if (id.empty()) return UnknownSkeleton(id);
  {
    absl::MutexLock lock(&cache_mu_);
    if (auto it = cached_.find(id); it != cached_.end()) {
      ++hits_;
      lru_.splice(lru_.begin(), lru_, it->second);
      return *it->second;
    }
    ++misses_;
  }
  // A miss: one read of the store. Skeletons are content-addressed, so
  // whatever version the store holds of `id`, its definition is the same.
  std::shared_ptr<const RegisteredSkeleton> entry = FindLocal(id);
  if (entry == nullptr && !reader_->shared()) return UnknownSkeleton(id);
  // An id this server does not hold, looked up in the shared store.
  if (entry == nullptr) read_throughs_.fetch_add(1, std::memory_order_relaxed);
  absl::StatusOr<StoreRead> read = reader_->Read(id);
  if (!read.ok()) {
    return absl::Status(
        read.status().code(),
        absl::StrCat("skeleton_id: '", ClientString(id),
                     "' is not in this server's skeleton cache and cannot be "
                     "read: ",
                     read.status().message()));
  }
  // Gone from the store: deleted (this registry hears of it in a moment).
  if (!read->record.has_value()) return UnknownSkeleton(id);
  if (entry == nullptr) {
    // Registered on another server, not heard of yet: the read fills in
    // its entry too.
    entry = Adopt(id, *read);
    if (entry == nullptr) return UnknownSkeleton(id);
  }
  auto loaded = std::make_shared<LoadedSkeleton>();
  loaded->definition_bytes = std::move(read->record->definition);
  v1::Skeleton definition;
  absl::StatusOr<Skeleton> skeleton =
      definition.ParseFromString(loaded->definition_bytes)
          ? Validate(definition)
          : absl::InternalError("the stored definition does not parse");
  if (!skeleton.ok()) {
    // It validated when registered, under the same limits.
    LogError(absl::StrCat("registry: cannot load skeleton ", entry->id, ": ",
                          skeleton.status().message()));
    return absl::InternalError(
        absl::StrCat("skeleton_id: '", ClientString(id),
                     "': the stored definition does not load: ",
                     skeleton.status().message()));
  }
  loaded->id = entry->id;
  loaded->version = entry->version;
  loaded->skeleton = *std::move(skeleton);
  loaded->memory_bytes = MemoryBytes(*loaded);
  std::shared_ptr<const LoadedSkeleton> out = std::move(loaded);
  // One larger than the whole cache is not kept: the bound holds always.
  if (out->memory_bytes > limits_.cache_bytes) return out;
  absl::MutexLock lock(&cache_mu_);
  if (auto it = cached_.find(id); it != cached_.end()) {
    return *it->second;  // Another call loaded it meanwhile.
  }
  // Deleted meanwhile: solve with it, but do not cache it.
  if (FindLocal(id) == nullptr) return out;
  lru_.push_front(out);
  cached_[out->id] = lru_.begin();
  cached_bytes_ += out->memory_bytes;
  while (cached_bytes_ > limits_.cache_bytes) {
    // Callers that hold the evicted skeleton keep it until they are done.
    const std::shared_ptr<const LoadedSkeleton>& last = lru_.back();
    cached_bytes_ -= last->memory_bytes;
    cached_.erase(last->id);
    lru_.pop_back();
    ++evictions_;
  }
  return out;
}

void Registry::Uncache(absl::string_view id) const {
  absl::MutexLock lock(&cache_mu_);
  auto it = cached_.find(id);
  if (it == cached_.end()) return;
  cached_bytes_ -= (*it->second)->memory_bytes;
  lru_.erase(it->second);
  cached_.erase(it);
}

int64_t Registry::cached_bytes() const {
  absl::MutexLock lock(&cache_mu_);
  return cached_bytes_;
}

int Registry::cached_skeletons() const {
  absl::MutexLock lock(&cache_mu_);
  return static_cast<int>(lru_.size());
}

SkeletonCacheStats Registry::cache_stats() const {
  absl::MutexLock lock(&cache_mu_);
  SkeletonCacheStats out;
  out.hits = hits_;
  out.misses = misses_;
  out.evictions = evictions_;
  out.bytes = cached_bytes_;
  out.entries = static_cast<int64_t>(lru_.size());
  out.limit_bytes = std::max<int64_t>(limits_.cache_bytes, 0);
  return out;
}

absl::Status Registry::CheckRoom(const RegisteredSkeleton& skeleton) const {
  if (limits_.max_total_bytes <= 0 ||
      total_bytes_ + skeleton.memory_bytes <= limits_.max_total_bytes) {
    return absl::OkStatus();
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "the registry holds ", total_bytes_, " bytes of skeletons and this one "
      "takes ", skeleton.memory_bytes, "; the limit is ",
      limits_.max_total_bytes,
      " (--max_registry_bytes); delete skeletons first"));
}

absl::Status Registry::CheckQuota(absl::string_view owner,
                                  int64_t bytes) const {
  if (owner.empty()) return absl::OkStatus();
  OwnerUsage usage;
  if (auto it = usage_.find(owner); it != usage_.end()) usage = it->second;
  if (limits_.max_owner_skeletons > 0 &&
      usage.skeletons + 1 > limits_.max_owner_skeletons) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "'", ClientString(owner), "' has registered ", usage.skeletons,
        " skeletons; the quota is ", limits_.max_owner_skeletons,
        " (--quota_skeletons); delete some first"));
  }
  if (limits_.max_owner_bytes > 0 &&
      usage.bytes + bytes > limits_.max_owner_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "'", ClientString(owner), "' holds ", usage.bytes,
        " bytes of skeletons and this one takes ", bytes, "; the quota is ",
        limits_.max_owner_bytes,
        " (--quota_registry_bytes); delete some first"));
  }
  return absl::OkStatus();
}

void Registry::Charge(absl::string_view owner, int sign, int64_t bytes) {
  OwnerUsage& usage = usage_[owner];
  usage.skeletons += sign;
  usage.bytes += sign * bytes;
  if (usage.skeletons <= 0) usage_.erase(owner);
}

void Registry::Publish(std::shared_ptr<const RegisteredSkeleton> skeleton,
                       std::vector<std::string> owners) {
  total_bytes_ += skeleton->memory_bytes;
  for (const std::string& owner : owners) {
    Charge(owner, +1, skeleton->memory_bytes);
  }
  if (!owners.empty()) owners_[skeleton->id] = std::move(owners);
  by_version_[skeleton->version] = skeleton;
  by_id_[skeleton->id] = std::move(skeleton);
}

absl::StatusOr<RegisterResult> Registry::AddOwner(
    const RegisteredSkeleton& known, absl::string_view owner,
    StoreWrite& write) {
  const RegisterResult result{known.id, known.version, false};
  std::vector<std::string> owners = Owners(known.id);
  if (owner.empty() ||
      std::find(owners.begin(), owners.end(), owner) != owners.end()) {
    return result;
  }
  {
    absl::ReaderMutexLock lock(&mu_);
    if (absl::Status quota = CheckQuota(owner, known.memory_bytes);
        !quota.ok()) {
      return quota;
    }
  }
  owners.emplace_back(owner);
  if (absl::Status status = store_->SetOwners(known.id, owners);
      !status.ok()) {
    return status;
  }
  if (absl::Status status = CommitLocked(write); !status.ok()) return status;
  SetOwnersLocked(known, std::move(owners));
  return result;
}

absl::StatusOr<RegisterResult> Registry::Register(
    const v1::Skeleton& definition, absl::string_view owner) {
  // Names first: they are the one unbounded part, and hashing a definition
  // with megabyte names would cost before it is refused.
  if (absl::Status names = CheckNames(definition, limits_.max_name_bytes);
      !names.ok()) {
    return names;
  }
  std::string id = SkeletonId(definition);
  if (std::shared_ptr<const RegisteredSkeleton> known = FindLocal(id)) {
    const std::vector<std::string> owners = Owners(id);
    if (owner.empty() ||
        std::find(owners.begin(), owners.end(), owner) != owners.end()) {
      return RegisterResult{known->id, known->version, false};
    }
  }
  // Validated before any lock (it takes the longest).
  std::string bytes = definition.SerializeAsString();
  absl::StatusOr<std::shared_ptr<const RegisteredSkeleton>> built =
      Build(definition, static_cast<int64_t>(bytes.size()), id, 0);
  if (!built.ok()) return built.status();
  absl::MutexLock write_lock(&write_mu_);
  StoreWrite write(store_.get());
  if (absl::Status status = BeginLocked(write); !status.ok()) return status;
  // Re-check under the writer lock: another writer may have just won.
  if (std::shared_ptr<const RegisteredSkeleton> known = FindLocal(id)) {
    return AddOwner(*known, owner, write);
  }
  {
    absl::ReaderMutexLock lock(&mu_);
    if (absl::Status room = CheckRoom(**built); !room.ok()) return room;
    if (absl::Status quota = CheckQuota(owner, (*built)->memory_bytes);
        !quota.ok()) {
      return quota;
    }
  }
  StoredSkeleton record{id, next_version_, std::move(bytes), {}};
  if (!owner.empty()) record.owners.emplace_back(owner);
  absl::StatusOr<int64_t> version = store_->Put(record);
  if (!version.ok()) return version.status();
  if (absl::Status status = CommitLocked(write); !status.ok()) return status;
  next_version_ = std::max(next_version_, *version + 1);
  // Not yet published: nobody else holds it.
  std::const_pointer_cast<RegisteredSkeleton>(*built)->version = *version;
  absl::MutexLock lock(&mu_);
  Publish(*std::move(built), std::move(record.owners));
  return RegisterResult{std::move(id), *version, true};
}

std::shared_ptr<const RegisteredSkeleton> Registry::FindLocal(
    absl::string_view id) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second;
}

std::shared_ptr<const RegisteredSkeleton> Registry::Find(
    absl::string_view id) const {
  std::shared_ptr<const RegisteredSkeleton> known = FindLocal(id);
  if (known != nullptr || id.empty()) return known;
  return ReadThrough(id);
}

std::shared_ptr<const RegisteredSkeleton> Registry::ReadThrough(
    absl::string_view id) const {
  if (!reader_->shared()) return nullptr;
  read_throughs_.fetch_add(1, std::memory_order_relaxed);
  absl::StatusOr<StoreRead> read = reader_->Read(id);
  if (!read.ok()) {
    LogError(absl::StrCat("registry: cannot read skeleton ", ClientString(id),
                          " from the store: ", read.status().message()));
    return nullptr;
  }
  if (!read->record.has_value()) return nullptr;
  return Adopt(id, *read);
}

std::shared_ptr<const RegisteredSkeleton> Registry::Adopt(
    absl::string_view id, const StoreRead& read) const {
  // Filling in what another server registered is a const lookup's cache
  // fill: the registry's contents do not change, only what it knows.
  Registry* self = const_cast<Registry*>(this);
  absl::MutexLock write_lock(&self->write_mu_);
  // A read older than what this registry applied says nothing new (the
  // skeleton was deleted since, or is already here).
  if (read.sequence > applied_) {
    self->ApplyRecordLocked(std::string(id), read.record);
  }
  return FindLocal(id);
}

absl::Status Registry::Delete(absl::string_view id, absl::string_view owner) {
  absl::MutexLock write_lock(&write_mu_);
  StoreWrite write(store_.get());
  if (absl::Status status = BeginLocked(write); !status.ok()) return status;
  std::shared_ptr<const RegisteredSkeleton> known = FindLocal(id);
  if (known == nullptr) return UnknownSkeleton(id);
  std::vector<std::string> owners = Owners(id);
  if (!owner.empty()) {
    auto mine = std::find(owners.begin(), owners.end(), owner);
    if (mine == owners.end()) {
      return absl::PermissionDeniedError(absl::StrCat(
          "skeleton_id: '", ClientString(id), "' was not registered by '",
          ClientString(owner),
          "'; deleting another's skeleton needs the admin role"));
    }
    if (owners.size() > 1) {
      // Others still hold it: `owner` only lets go.
      owners.erase(mine);
      absl::Status status = store_->SetOwners(id, owners);
      if (!status.ok()) return status;
      if (status = CommitLocked(write); !status.ok()) return status;
      SetOwnersLocked(*known, std::move(owners));
      return absl::OkStatus();
    }
  }
  absl::Status status = store_->Delete(id);
  if (!status.ok()) return status;
  if (status = CommitLocked(write); !status.ok()) return status;
  RemoveLocked(*known);
  return absl::OkStatus();
}

std::vector<std::string> Registry::Owners(absl::string_view id) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = owners_.find(id);
  return it == owners_.end() ? std::vector<std::string>{} : it->second;
}

OwnerUsage Registry::Usage(absl::string_view owner) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = usage_.find(owner);
  return it == usage_.end() ? OwnerUsage{} : it->second;
}

absl::StatusOr<SkeletonPage> Registry::List(
    int page_size, absl::string_view page_token) const {
  int64_t after = 0;
  if (!page_token.empty() &&
      (!absl::SimpleAtoi(page_token, &after) || after < 0)) {
    return absl::InvalidArgumentError(absl::StrCat("page_token: '",
                                                   ClientString(page_token),
                                                   "' is not a token from ",
                                                   "ListSkeletons"));
  }
  SkeletonPage page;
  absl::ReaderMutexLock lock(&mu_);
  for (auto it = by_version_.upper_bound(after); it != by_version_.end();
       ++it) {
    if (static_cast<int>(page.skeletons.size()) == page_size) {
      page.next_page_token = absl::StrCat(page.skeletons.back()->version);
      break;
    }
    page.skeletons.push_back(it->second);
  }
  return page;
}

int64_t Registry::total_bytes() const {
  absl::ReaderMutexLock lock(&mu_);
  return total_bytes_;
}

int Registry::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return static_cast<int>(by_id_.size());
}

}  // namespace reach
