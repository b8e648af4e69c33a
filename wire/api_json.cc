#include "wire/api_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "wire/json.h"

namespace reach {
namespace {

namespace pb = google::protobuf;

// 2^53: integers up to this are exact in a JSON reader's double.
constexpr double kExactInteger = 9007199254740992.0;

bool IsVec3(const pb::Descriptor* d) {
  return d->full_name() == "reach.v1.Vec3";
}
bool IsQuat(const pb::Descriptor* d) {
  return d->full_name() == "reach.v1.Quat";
}

// A field of `d` by the name a client wrote: the proto's, or its
// lowerCamelCase JSON name.
const pb::FieldDescriptor* FieldOf(const pb::Descriptor* d,
                                   const std::string& key) {
  if (const pb::FieldDescriptor* f = d->FindFieldByName(key)) return f;
  for (int i = 0; i < d->field_count(); ++i) {
    if (d->field(i)->json_name() == key) return d->field(i);
  }
  return nullptr;
}

std::string Child(const std::string& path, const std::string& name) {
  return path.empty() ? name : absl::StrCat(path, ".", name);
}

// The array components of a Vec3 / Quat, in array order.
const std::vector<std::string>& Components(const pb::Descriptor* d) {
  static const auto* vec3 = new std::vector<std::string>{"x", "y", "z"};
  static const auto* quat = new std::vector<std::string>{"x", "y", "z", "w"};
  return IsVec3(d) ? *vec3 : *quat;
}

// `value`, the JSON of a message of type `d` as the API writes it, turned
// into protobuf's JSON mapping (arrays to objects) for protobuf's parser.
absl::Status ToProtoShape(pb::Value* value, const pb::Descriptor* d,
                          const std::string& path) {
  if (IsVec3(d) || IsQuat(d)) {
    if (value->kind_case() != pb::Value::kListValue) return absl::OkStatus();
    const std::vector<std::string>& names = Components(d);
    const pb::ListValue list = value->list_value();
    if (list.values_size() != static_cast<int>(names.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": ", IsVec3(d) ? "[x, y, z]" : "[x, y, z, w]", " needs ",
          names.size(), " numbers, got ", list.values_size()));
    }
    pb::Struct object;
    for (int i = 0; i < list.values_size(); ++i) {
      const pb::Value& component = list.values(i);
      // A string may be protobuf's "NaN" / "Infinity", which the service
      // then refuses by name; anything else protobuf refuses.
      if (component.kind_case() != pb::Value::kNumberValue &&
          component.kind_case() != pb::Value::kStringValue) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, "[", i, "] (", names[i], ") is not a number"));
      }
      (*object.mutable_fields())[names[i]] = component;
    }
    *value->mutable_struct_value() = std::move(object);
    return absl::OkStatus();
  }
  if (value->kind_case() != pb::Value::kStructValue) return absl::OkStatus();
  for (auto& [key, field_value] :
       *value->mutable_struct_value()->mutable_fields()) {
    const pb::FieldDescriptor* f = FieldOf(d, key);
    if (f == nullptr || f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE ||
        f->is_map()) {
      continue;  // protobuf's parser names what it does not know.
    }
    const std::string name = Child(path, f->name());
    if (!f->is_repeated()) {
      if (absl::Status ok = ToProtoShape(&field_value, f->message_type(), name);
          !ok.ok()) {
        return ok;
      }
      continue;
    }
    if (field_value.kind_case() != pb::Value::kListValue) continue;
    pb::ListValue* list = field_value.mutable_list_value();
    for (int i = 0; i < list->values_size(); ++i) {
      if (absl::Status ok =
              ToProtoShape(list->mutable_values(i), f->message_type(),
                           absl::StrCat(name, "[", i, "]"));
          !ok.ok()) {
        return ok;
      }
    }
  }
  return absl::OkStatus();
}

// A 64-bit integer protobuf wrote as a string, as a number when exact.
void IntegerToNumber(pb::Value* value) {
  double number = 0;
  if (value->kind_case() == pb::Value::kStringValue &&
      absl::SimpleAtod(value->string_value(), &number) &&
      std::fabs(number) <= kExactInteger) {
    value->set_number_value(number);
  }
}

// SolveResponse's flat `numbers` (`width` per entry) as one array per entry;
// a rotation's (w, x, y, z) as [x, y, z, w].
void Chunk(pb::Value* value, int width, bool quaternion) {
  if (value->kind_case() != pb::Value::kListValue) return;
  const pb::ListValue flat = value->list_value();
  pb::ListValue nested;
  for (int i = 0; i + width <= flat.values_size(); i += width) {
    pb::ListValue* entry = nested.add_values()->mutable_list_value();
    for (int k = 0; k < width; ++k) {
      const int from = quaternion ? i + (k + 1) % 4 : i + k;
      *entry->add_values() = flat.values(from);
    }
  }
  *value->mutable_list_value() = std::move(nested);
}

// The reverse of ToProtoShape, on protobuf's JSON of a message of type `d`.
void ToApiShape(pb::Value* value, const pb::Descriptor* d) {
  if (IsVec3(d) || IsQuat(d)) {
    if (value->kind_case() != pb::Value::kStructValue) return;
    const pb::Struct object = value->struct_value();
    pb::ListValue list;
    for (const std::string& name : Components(d)) {
      const auto it = object.fields().find(name);
      if (it == object.fields().end()) {
        list.add_values()->set_number_value(0);
      } else {
        *list.add_values() = it->second;
      }
    }
    *value->mutable_list_value() = std::move(list);
    return;
  }
  if (value->kind_case() != pb::Value::kStructValue) return;
  const bool solve_response = d->full_name() == "reach.v1.SolveResponse";
  for (auto& [key, field_value] :
       *value->mutable_struct_value()->mutable_fields()) {
    const pb::FieldDescriptor* f = d->FindFieldByName(key);
    if (f == nullptr || f->is_map()) continue;
    if (solve_response && f->name() == "rotations") {
      Chunk(&field_value, 4, /*quaternion=*/true);
      continue;
    }
    if (solve_response && f->name() == "translations") {
      Chunk(&field_value, 3, /*quaternion=*/false);
      continue;
    }
    const auto type = f->cpp_type();
    const bool integer = type == pb::FieldDescriptor::CPPTYPE_INT64 ||
                         type == pb::FieldDescriptor::CPPTYPE_UINT64;
    const bool message = type == pb::FieldDescriptor::CPPTYPE_MESSAGE;
    if (!integer && !message) continue;
    auto convert = [&](pb::Value* v) {
      if (integer) {
        IntegerToNumber(v);
      } else {
        ToApiShape(v, f->message_type());
      }
    };
    if (!f->is_repeated()) {
      convert(&field_value);
    } else if (field_value.kind_case() == pb::Value::kListValue) {
      for (pb::Value& element :
           *field_value.mutable_list_value()->mutable_values()) {
        convert(&element);
      }
    }
  }
}

// A number as JSON: an integer exactly when it is one (and exact in a
// double), else the shortest of 15 or 17 significant digits that reads
// back as the same double (protobuf's SimpleDtoa). Not finite: protobuf's
// quoted "NaN" / "Infinity" / "-Infinity" (protobuf writes them so; they
// never reach here as numbers).
void AppendNumber(double v, std::string* out) {
  if (std::isnan(v)) {
    out->append("\"NaN\"");
    return;
  }
  if (std::isinf(v)) {
    out->append(v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    return;
  }
  if (v == std::floor(v) && std::fabs(v) <= kExactInteger) {
    absl::StrAppend(out, static_cast<int64_t>(v));
    return;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.15g", v);
  if (std::strtod(buffer, nullptr) != v) {
    std::snprintf(buffer, sizeof(buffer), "%.17g", v);
  }
  out->append(buffer);
}

void AppendString(const std::string& text, std::string* out) {
  out->push_back('"');
  for (const char c : text) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
          out->append(escaped);
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

// `value` as JSON, an object's keys in the order of `d`'s fields (the
// proto's, so an answer's keys always come in the same order); null `d`:
// sorted.
void Print(const pb::Value& value, const pb::Descriptor* d, std::string* out) {
  switch (value.kind_case()) {
    case pb::Value::kNumberValue:
      AppendNumber(value.number_value(), out);
      return;
    case pb::Value::kStringValue:
      AppendString(value.string_value(), out);
      return;
    case pb::Value::kBoolValue:
      out->append(value.bool_value() ? "true" : "false");
      return;
    case pb::Value::kListValue: {
      out->push_back('[');
      bool first = true;
      for (const pb::Value& element : value.list_value().values()) {
        if (!first) out->push_back(',');
        first = false;
        Print(element, d, out);
      }
      out->push_back(']');
      return;
    }
    case pb::Value::kStructValue: {
      const auto& fields = value.struct_value().fields();
      std::vector<std::pair<std::string, const pb::FieldDescriptor*>> keys;
      if (d != nullptr) {
        for (int i = 0; i < d->field_count(); ++i) {
          if (fields.count(d->field(i)->name()) > 0) {
            keys.emplace_back(d->field(i)->name(), d->field(i));
          }
        }
      }
      if (keys.size() != fields.size()) {
        keys.clear();
        for (const auto& [key, unused] : fields) {
          keys.emplace_back(key,
                            d == nullptr ? nullptr : d->FindFieldByName(key));
        }
        std::sort(keys.begin(), keys.end());
      }
      out->push_back('{');
      bool first = true;
      for (const auto& [key, field] : keys) {
        if (!first) out->push_back(',');
        first = false;
        AppendString(key, out);
        out->push_back(':');
        Print(fields.at(key),
              field == nullptr ? nullptr : field->message_type(), out);
      }
      out->push_back('}');
      return;
    }
    default:
      out->append("null");
  }
}

}  // namespace

absl::Status ApiJsonToMessage(absl::string_view json, pb::Message* message) {
  pb::Value value;
  if (absl::Status parsed = JsonToMessage(json, &value); !parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not JSON: ", parsed.message()));
  }
  if (value.kind_case() != pb::Value::kStructValue) {
    return absl::InvalidArgumentError("not a JSON object");
  }
  if (absl::Status shaped = ToProtoShape(&value, message->GetDescriptor(), "");
      !shaped.ok()) {
    return shaped;
  }
  std::string proto_json;
  if (const auto printed = pb::util::MessageToJsonString(value, &proto_json);
      !printed.ok()) {
    return absl::InvalidArgumentError(std::string(printed.message()));
  }
  message->Clear();
  const auto read = pb::util::JsonStringToMessage(proto_json, message);
  if (!read.ok())
    return absl::InvalidArgumentError(std::string(read.message()));
  return absl::OkStatus();
}

absl::StatusOr<std::string> MessageToApiJson(const pb::Message& message) {
  pb::util::JsonPrintOptions print;
  print.always_print_primitive_fields = true;
  print.preserve_proto_field_names = true;
  std::string proto_json;
  if (const auto printed =
          pb::util::MessageToJsonString(message, &proto_json, print);
      !printed.ok()) {
    return absl::InternalError(std::string(printed.message()));
  }
  pb::Value value;
  if (const auto read = pb::util::JsonStringToMessage(proto_json, &value);
      !read.ok()) {
    return absl::InternalError(std::string(read.message()));
  }
  ToApiShape(&value, message.GetDescriptor());
  std::string json;
  json.reserve(proto_json.size());
  Print(value, message.GetDescriptor(), &json);
  return json;
}

}  // namespace reach
