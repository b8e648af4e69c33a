#include "server/unknown_method.h"

#include "absl/strings/str_cat.h"
#include "wire/convert.h"

namespace reach {
namespace {

class UnknownMethodReactor final : public grpc::ServerGenericBidiReactor {
 public:
  explicit UnknownMethodReactor(const std::string& method) {
    Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        absl::StrCat("unknown method ", ClientString(method))));
  }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerGenericBidiReactor* UnknownMethodService::CreateReactor(
    grpc::GenericCallbackServerContext* context) {
  return new UnknownMethodReactor(context->method());
}

}  // namespace reach
