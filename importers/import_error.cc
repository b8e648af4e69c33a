#include "importers/import_error.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace reach::import {

absl::Status ImportError(absl::string_view file, int line,
                         absl::string_view element,
                         absl::string_view message) {
  std::string text(file);
  if (line > 0) absl::StrAppend(&text, ":", line);
  absl::StrAppend(&text, ": ");
  if (!element.empty()) absl::StrAppend(&text, element, ": ");
  absl::StrAppend(&text, message);
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

absl::Status ReadFile(const std::string& path, std::string* contents) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    std::string message = absl::StrCat(path, ": cannot open: ",
                                       std::strerror(error));
    return error == ENOENT ? absl::NotFoundError(message)
                           : absl::InvalidArgumentError(message);
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": read failed"));
  }
  *contents = std::move(buffer).str();
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
