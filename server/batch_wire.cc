#include "server/batch_wire.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "wire/convert.h"
#include "solvers/limits.h"

namespace reach {
namespace {

using google::protobuf::io::CodedOutputStream;
using google::protobuf::internal::WireFormatLite;

constexpr int kItemsField = 1;  // SolveBatchRequest.items, SolveBatchResponse.items
constexpr int kSkeletonIdField = 2;  // SolveBatchRequest.skeleton_id

// SolveResponse and GoalResult field numbers (proto/reach/v1/solve.proto).
constexpr int kSequenceField = 1;
constexpr int kResultsField = 3;
constexpr int kRotatedJointsField = 7;
constexpr int kRotationsField = 8;
constexpr int kTranslatedJointsField = 9;
constexpr int kTranslationsField = 10;
constexpr int kHingeJointsField = 11;
constexpr int kHingeAnglesField = 12;
constexpr int kReachedField = 1;
constexpr int kPositionErrorField = 2;
constexpr int kOrientationErrorField = 3;
constexpr int kIterationsField = 4;
constexpr int kSolverField = 5;
constexpr int kToleranceField = 6;
constexpr int kOrientationToleranceField = 7;

// Tag sizes: every field number here is below 16, so each tag is one byte.
constexpr size_t kTagSize = 1;
constexpr size_t kDoubleSize = kTagSize + sizeof(double);

// proto3 writes a double unless its bits are all zero (-0.0 is written).
bool IsWritten(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits != 0;
}

size_t LengthDelimitedSize(size_t payload) {
  return kTagSize + CodedOutputStream::VarintSize32(
                        static_cast<uint32_t>(payload)) + payload;
}

size_t GoalResultSize(const GoalResult& r) {
  size_t size = 0;
  if (r.reached) size += kTagSize + 1;
  if (IsWritten(r.position_error)) size += kDoubleSize;
  if (IsWritten(r.orientation_error_rad)) size += kDoubleSize;
  if (r.iterations != 0) size += kTagSize + WireFormatLite::Int32Size(r.iterations);
  const int solver = static_cast<int>(r.solver);
  if (solver != 0) size += kTagSize + WireFormatLite::EnumSize(solver);
  if (IsWritten(r.tolerance)) size += kDoubleSize;
  if (IsWritten(r.orientation_tolerance_rad)) size += kDoubleSize;
  return size;
}

uint8_t* WriteDouble(int field, double v, uint8_t* p) {
  return IsWritten(v) ? WireFormatLite::WriteDoubleToArray(field, v, p) : p;
}

uint8_t* WriteGoalResult(const GoalResult& r, size_t size, uint8_t* p) {
  p = WireFormatLite::WriteTagToArray(
      kResultsField, WireFormatLite::WIRETYPE_LENGTH_DELIMITED, p);
  p = CodedOutputStream::WriteVarint32ToArray(static_cast<uint32_t>(size), p);
  if (r.reached) p = WireFormatLite::WriteBoolToArray(kReachedField, true, p);
  p = WriteDouble(kPositionErrorField, r.position_error, p);
  p = WriteDouble(kOrientationErrorField, r.orientation_error_rad, p);
  if (r.iterations != 0) {
    p = WireFormatLite::WriteInt32ToArray(kIterationsField, r.iterations, p);
  }
  const int solver = static_cast<int>(r.solver);
  if (solver != 0) p = WireFormatLite::WriteEnumToArray(kSolverField, solver, p);
  p = WriteDouble(kToleranceField, r.tolerance, p);
  return WriteDouble(kOrientationToleranceField, r.orientation_tolerance_rad,
                     p);
}

// The packed index field `joints_field` of `joints`, then the packed doubles
// `values_field` of `per_joint` numbers for each of them (values(j, p)
// writes joint j's).
template <typename Values>
uint8_t* WriteChangedJoints(absl::Span<const uint32_t> joints,
                            size_t joints_bytes, int joints_field,
                            int values_field, int per_joint, Values values,
                            uint8_t* p) {
  if (joints.empty()) return p;
  p = WireFormatLite::WriteTagToArray(
      joints_field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED, p);
  p = CodedOutputStream::WriteVarint32ToArray(
      static_cast<uint32_t>(joints_bytes), p);
  for (uint32_t j : joints) p = CodedOutputStream::WriteVarint32ToArray(j, p);
  p = WireFormatLite::WriteTagToArray(
      values_field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED, p);
  p = CodedOutputStream::WriteVarint32ToArray(
      static_cast<uint32_t>(joints.size() * per_joint * sizeof(double)), p);
  for (uint32_t j : joints) p = values(j, p);
  return p;
}

size_t IndicesSize(absl::Span<const uint32_t> joints) {
  size_t size = 0;
  for (uint32_t j : joints) size += CodedOutputStream::VarintSize32(j);
  return size;
}

size_t ChangedJointsSize(absl::Span<const uint32_t> joints,
                         size_t joints_bytes, int per_joint) {
  if (joints.empty()) return 0;
  return LengthDelimitedSize(joints_bytes) +
         LengthDelimitedSize(joints.size() * per_joint * sizeof(double));
}

}  // namespace

absl::Status SplitBatchItems(absl::string_view request, int max_items,
                             BatchRequestView* out) {
  out->items.clear();
  out->skeleton_id = absl::string_view();
  google::protobuf::io::CodedInputStream input(
      reinterpret_cast<const uint8_t*>(request.data()),
      static_cast<int>(request.size()));
  while (true) {
    const int offset = input.CurrentPosition();
    const uint32_t tag = input.ReadTag();
    if (tag == 0) {
      if (offset == static_cast<int>(request.size())) return absl::OkStatus();
      break;  // A zero tag or an unreadable varint.
    }
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    if ((field == kItemsField || field == kSkeletonIdField) &&
        WireFormatLite::GetTagWireType(tag) ==
            WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      uint32_t size = 0;
      if (!input.ReadVarint32(&size)) break;
      const int start = input.CurrentPosition();
      if (size > request.size() - static_cast<size_t>(start)) break;
      const absl::string_view bytes = request.substr(start, size);
      if (field == kItemsField) {
        if (static_cast<int>(out->items.size()) >= max_items) {
          return absl::InvalidArgumentError(absl::StrCat(
              "items: more than ", max_items, " entries (--max_batch)"));
        }
        out->items.push_back(bytes);
      } else {
        out->skeleton_id = bytes;
      }
      if (!input.Skip(static_cast<int>(size))) break;
    } else if (!WireFormatLite::SkipField(&input, tag)) {
      break;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "request: not a valid SolveBatchRequest (malformed at byte ",
      input.CurrentPosition(), " of ", request.size(), ")"));
}

bool ScanSolveRequest(absl::string_view request, absl::string_view* skeleton_id,
                      bool* return_globals) {
  constexpr int kRequestSkeletonIdField = 1;   // SolveRequest.skeleton_id
  constexpr int kReturnGlobalsField = 5;       // SolveRequest.return_globals
  *skeleton_id = absl::string_view();
  *return_globals = false;
  google::protobuf::io::CodedInputStream input(
      reinterpret_cast<const uint8_t*>(request.data()),
      static_cast<int>(request.size()));
  while (true) {
    const int offset = input.CurrentPosition();
    const uint32_t tag = input.ReadTag();
    if (tag == 0) return offset == static_cast<int>(request.size());
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    const auto type = WireFormatLite::GetTagWireType(tag);
    if (field == kRequestSkeletonIdField &&
        type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      uint32_t size = 0;
      if (!input.ReadVarint32(&size)) return false;
      const int start = input.CurrentPosition();
      if (size > request.size() - static_cast<size_t>(start)) return false;
      *skeleton_id = request.substr(start, size);
      if (!input.Skip(static_cast<int>(size))) return false;
    } else if (field == kReturnGlobalsField &&
               type == WireFormatLite::WIRETYPE_VARINT) {
      uint64_t value = 0;
      if (!input.ReadVarint64(&value)) return false;
      *return_globals = value != 0;
    } else if (!WireFormatLite::SkipField(&input, tag)) {
      return false;
    }
  }
}

void AppendBatchItem(const google::protobuf::MessageLite& response,
                     std::string* out) {
  const size_t size = response.ByteSizeLong();
  uint8_t header[1 + 5];
  uint8_t* end = WireFormatLite::WriteTagToArray(
      kItemsField, WireFormatLite::WIRETYPE_LENGTH_DELIMITED, header);
  end = google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(
      static_cast<uint32_t>(size), end);
  const size_t at = out->size();
  out->resize(at + (end - header) + size);
  uint8_t* dst = reinterpret_cast<uint8_t*>(&(*out)[at]);
  dst = std::copy(header, end, dst);
  response.SerializeWithCachedSizesToArray(dst);
}

void AppendSolvedItem(const Skeleton& skeleton, uint64_t sequence,
                      const Pose& start, const Pose& solved,
                      absl::Span<const GoalResult> results,
                      std::vector<uint32_t>* changed, std::string* out) {
  // The changed joints: rotated ones, then translated ones, then the
  // rotated hinges.
  changed->clear();
  const int n = static_cast<int>(solved.local.size());
  for (int i = 0; i < n; ++i) {
    if (RotationChanged(start.local[i], solved.local[i])) {
      changed->push_back(static_cast<uint32_t>(i));
    }
  }
  const size_t num_rotated = changed->size();
  for (int i = 0; i < n; ++i) {
    if (TranslationChanged(start.local[i], solved.local[i])) {
      changed->push_back(static_cast<uint32_t>(i));
    }
  }
  const size_t num_changed = changed->size();
  for (size_t k = 0; k < num_rotated; ++k) {
    const uint32_t j = (*changed)[k];
    if (skeleton.joint(static_cast<int>(j)).type == JointType::kHinge) {
      changed->push_back(j);
    }
  }
  const absl::Span<const uint32_t> rotated =
      absl::MakeConstSpan(*changed).subspan(0, num_rotated);
  const absl::Span<const uint32_t> translated =
      absl::MakeConstSpan(*changed).subspan(num_rotated,
                                            num_changed - num_rotated);
  const absl::Span<const uint32_t> hinges =
      absl::MakeConstSpan(*changed).subspan(num_changed);
  const size_t rotated_bytes = IndicesSize(rotated);
  const size_t translated_bytes = IndicesSize(translated);
  const size_t hinges_bytes = IndicesSize(hinges);

  // Sizes first (the item and each result are length-prefixed); the fields
  // go in the order protobuf writes them: by field number.
  size_t size = 0;
  if (sequence != 0) {
    size += kTagSize + CodedOutputStream::VarintSize64(sequence);
  }
  for (const GoalResult& r : results) {
    size += LengthDelimitedSize(GoalResultSize(r));
  }
  size += ChangedJointsSize(rotated, rotated_bytes, 4) +
          ChangedJointsSize(translated, translated_bytes, 3) +
          ChangedJointsSize(hinges, hinges_bytes, 1);

  const size_t at = out->size();
  out->resize(at + LengthDelimitedSize(size));
  uint8_t* p = reinterpret_cast<uint8_t*>(&(*out)[at]);
  p = WireFormatLite::WriteTagToArray(
      kItemsField, WireFormatLite::WIRETYPE_LENGTH_DELIMITED, p);
  p = CodedOutputStream::WriteVarint32ToArray(static_cast<uint32_t>(size), p);
  if (sequence != 0) {
    p = WireFormatLite::WriteUInt64ToArray(kSequenceField, sequence, p);
  }
  for (const GoalResult& r : results) {
    p = WriteGoalResult(r, GoalResultSize(r), p);
  }
  // Hinges are reported as ToProto reports them (ReportRotation): the
  // rotation regenerated from the angle within limits.
  p = WriteChangedJoints(
      rotated, rotated_bytes, kRotatedJointsField, kRotationsField, 4,
      [&](uint32_t j, uint8_t* q) {
        const Eigen::Quaterniond r =
            ReportRotation(skeleton.joint(static_cast<int>(j)),
                           solved.local[j].rotation)
                .rotation;
        for (double v : {r.w(), r.x(), r.y(), r.z()}) {
          q = WireFormatLite::WriteDoubleNoTagToArray(v, q);
        }
        return q;
      },
      p);
  p = WriteChangedJoints(
      translated, translated_bytes, kTranslatedJointsField, kTranslationsField,
      3,
      [&](uint32_t j, uint8_t* q) {
        const Eigen::Vector3d& t = solved.local[j].translation;
        for (double v : {t.x(), t.y(), t.z()}) {
          q = WireFormatLite::WriteDoubleNoTagToArray(v, q);
        }
        return q;
      },
      p);
  WriteChangedJoints(
      hinges, hinges_bytes, kHingeJointsField, kHingeAnglesField, 1,
      [&](uint32_t j, uint8_t* q) {
        return WireFormatLite::WriteDoubleNoTagToArray(
            HingeAngleWithinLimits(skeleton.joint(static_cast<int>(j)),
                                   solved.local[j].rotation),
            q);
      },
      p);
}

}  // namespace reach
