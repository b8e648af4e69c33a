#include "server/batch_wire.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"

namespace reach {
namespace {

using google::protobuf::internal::WireFormatLite;

constexpr int kItemsField = 1;  // SolveBatchRequest.items, SolveBatchResponse.items
constexpr int kSkeletonIdField = 2;  // SolveBatchRequest.skeleton_id

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

}  // namespace reach
