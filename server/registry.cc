#include "server/registry.h"

#include <cmath>

#include <openssl/sha.h>

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/convert.h"

namespace reach {

absl::Status UnknownSkeleton(absl::string_view id) {
  if (id.empty()) return absl::InvalidArgumentError("skeleton_id: required");
  return absl::NotFoundError(
      absl::StrCat("skeleton_id: no skeleton '", id, "'"));
}

namespace {

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

}  // namespace

std::string SkeletonId(const v1::Skeleton& definition) {
  v1::Skeleton canonical = definition;
  CanonicalizeZeros(&canonical);
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    canonical.SerializeToCodedStream(&coded);
  }
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
         digest);
  return absl::BytesToHexString(absl::string_view(
      reinterpret_cast<const char*>(digest), SHA256_DIGEST_LENGTH));
}

absl::StatusOr<std::unique_ptr<Registry>> Registry::Create(
    std::unique_ptr<SkeletonStore> store, const SkeletonLimits& limits,
    std::vector<std::string>* skipped) {
  absl::StatusOr<std::vector<StoredSkeleton>> records = store->LoadAll();
  if (!records.ok()) return records.status();
  std::unique_ptr<Registry> registry(new Registry(std::move(store), limits));
  absl::MutexLock write_lock(&registry->write_mu_);
  absl::MutexLock lock(&registry->mu_);
  for (StoredSkeleton& record : *records) {
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
        registry->Build(definition, record.id, record.version);
    if (!built.ok()) {
      if (skipped != nullptr) {
        skipped->push_back(
            absl::StrCat(record.id, ": ", built.status().message()));
      }
      continue;
    }
    registry->Publish(*std::move(built));
  }
  return registry;
}

absl::StatusOr<std::shared_ptr<const RegisteredSkeleton>> Registry::Build(
    const v1::Skeleton& definition, std::string id, int64_t version) const {
  SkeletonDef def;
  absl::Status status = FromProto(definition, &def);
  if (!status.ok()) return status;
  absl::StatusOr<Skeleton> skeleton = Skeleton::Create(std::move(def), limits_);
  if (!skeleton.ok()) return skeleton.status();
  auto out = std::make_shared<RegisteredSkeleton>(RegisteredSkeleton{
      std::move(id), version, definition, *std::move(skeleton)});
  return std::shared_ptr<const RegisteredSkeleton>(std::move(out));
}

void Registry::Publish(std::shared_ptr<const RegisteredSkeleton> skeleton) {
  by_version_[skeleton->version] = skeleton;
  by_id_[skeleton->id] = std::move(skeleton);
}

absl::StatusOr<RegisterResult> Registry::Register(
    const v1::Skeleton& definition) {
  std::string id = SkeletonId(definition);
  if (std::shared_ptr<const RegisteredSkeleton> known = Find(id)) {
    return RegisterResult{known->id, known->version, false};
  }
  absl::MutexLock write_lock(&write_mu_);
  // Re-check under the writer lock: another writer may have just won.
  if (std::shared_ptr<const RegisteredSkeleton> known = Find(id)) {
    return RegisterResult{known->id, known->version, false};
  }
  absl::StatusOr<std::shared_ptr<const RegisteredSkeleton>> built =
      Build(definition, id, next_version_);
  if (!built.ok()) return built.status();
  StoredSkeleton record{id, next_version_, definition.SerializeAsString()};
  absl::Status status = store_->Put(record);
  if (!status.ok()) return status;
  ++next_version_;
  absl::MutexLock lock(&mu_);
  Publish(*built);
  return RegisterResult{std::move(id), record.version, true};
}

std::shared_ptr<const RegisteredSkeleton> Registry::Find(
    absl::string_view id) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second;
}

absl::Status Registry::Delete(absl::string_view id) {
  absl::MutexLock write_lock(&write_mu_);
  std::shared_ptr<const RegisteredSkeleton> known = Find(id);
  if (known == nullptr) return UnknownSkeleton(id);
  absl::Status status = store_->Delete(id);
  if (!status.ok()) return status;
  absl::MutexLock lock(&mu_);
  by_version_.erase(known->version);
  by_id_.erase(known->id);
  return absl::OkStatus();
}

absl::StatusOr<SkeletonPage> Registry::List(
    int page_size, absl::string_view page_token) const {
  int64_t after = 0;
  if (!page_token.empty() &&
      (!absl::SimpleAtoi(page_token, &after) || after < 0)) {
    return absl::InvalidArgumentError(absl::StrCat("page_token: '", page_token,
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

int Registry::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return static_cast<int>(by_id_.size());
}

}  // namespace reach
