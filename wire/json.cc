#include "wire/json.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "google/protobuf/util/json_util.h"

namespace reach {
namespace {

// A character that continues a bare token (a number, a literal, a name).
bool InToken(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
         c == '.' || c == '+' || c == '-';
}

absl::Status Parse(absl::string_view json, google::protobuf::Message* message) {
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), message);
  if (status.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(std::string(status.message()));
}

}  // namespace

std::string QuoteNonFiniteLiterals(absl::string_view json, int* count) {
  constexpr absl::string_view kLiterals[] = {"NaN", "Infinity", "-Infinity"};
  std::string out;
  out.reserve(json.size() + 16);
  int quoted = 0;
  bool in_string = false;
  bool escaped = false;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      out += c;
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      continue;
    }
    bool matched = false;
    if (i == 0 || !InToken(json[i - 1])) {
      for (absl::string_view literal : kLiterals) {
        const size_t end = i + literal.size();
        if (absl::StartsWith(json.substr(i), literal) &&
            (end == json.size() || !InToken(json[end]))) {
          out += '"';
          out.append(literal.data(), literal.size());
          out += '"';
          i = end - 1;
          ++quoted;
          matched = true;
          break;
        }
      }
    }
    if (!matched) out += c;
  }
  if (count != nullptr) *count = quoted;
  return out;
}

absl::Status JsonToMessage(absl::string_view json,
                           google::protobuf::Message* message) {
  const absl::Status status = Parse(json, message);
  if (status.ok()) return status;
  int quoted = 0;
  const std::string fixed = QuoteNonFiniteLiterals(json, &quoted);
  if (quoted == 0) return status;
  message->Clear();
  return Parse(fixed, message);
}

}  // namespace reach
