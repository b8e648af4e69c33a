#include "importers/import_error.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "wire/convert.h"

namespace reach::import {

absl::Status ImportError(absl::string_view file, int line,
                         absl::string_view element,
                         absl::string_view message) {
  // The element and message quote the file (names, tokens), which may be
  // anything: one line of valid UTF-8, and bounded.
  std::string text = ClientString(file, 1000);
  if (line > 0) absl::StrAppend(&text, ":", line);
  absl::StrAppend(&text, ": ");
  if (!element.empty()) {
    absl::StrAppend(&text, ClientString(element, 400), ": ");
  }
  absl::StrAppend(&text, ClientString(message, 2000));
  return absl::InvalidArgumentError(text);
}

absl::Status CheckCreatable(absl::string_view file, absl::string_view element,
                            const SkeletonDef& def) {
  const absl::StatusOr<Skeleton> created = Skeleton::Create(def);
  if (created.ok()) return absl::OkStatus();
  std::string message(created.status().message());
  int index = -1;
  size_t end = 0;
  if (std::sscanf(message.c_str(), "joints[%d]%zn", &index, &end) == 1 &&
      index >= 0 && index < static_cast<int>(def.joints.size())) {
    message.insert(end, absl::StrCat(" '", def.joints[index].name, "'"));
  }
  return ImportError(file, 0, element, message);
}

absl::Status ReadFile(const std::string& path, std::string* contents,
                      int64_t max_bytes, absl::string_view limit_name) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    std::string message =
        absl::StrCat(path, ": cannot open: ", std::strerror(error));
    return error == ENOENT ? absl::NotFoundError(message)
                           : absl::InvalidArgumentError(message);
  }
  const auto too_large = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": larger than the limit of ", max_bytes, " bytes (",
                     limit_name, ")"));
  };
  std::string text;
  // A regular file says its size: refuse it unread, or read it into one
  // allocation.
  if (in.seekg(0, std::ios::end)) {
    const std::streamoff size = in.tellg();
    if (size > max_bytes) return too_large();
    if (size > 0) text.reserve(static_cast<size_t>(size));
    in.seekg(0, std::ios::beg);
  }
  in.clear();
  // Then in chunks, bounded on their own: a pipe or a device says no size,
  // and a file can grow while it is read.
  char chunk[64 * 1024];
  while (in.read(chunk, sizeof(chunk)) || in.gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in.gcount()));
    if (static_cast<uint64_t>(text.size()) > static_cast<uint64_t>(max_bytes)) {
      return too_large();
    }
  }
  if (in.bad()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": read failed"));
  }
  *contents = std::move(text);
  return absl::OkStatus();
}

std::string FileStem(absl::string_view path) {
  const size_t slash = path.rfind('/');
  if (slash != absl::string_view::npos) path.remove_prefix(slash + 1);
  const size_t dot = path.rfind('.');
  if (dot != absl::string_view::npos && dot > 0) path = path.substr(0, dot);
  return std::string(path);
}

}  // namespace reach::import
