// Answers every method the server does not serve: UNIMPLEMENTED naming the
// method ("unknown method /x.Y/Z", the name cut by ClientString), where
// gRPC's own fallback answers with an empty message. The CallInterceptor
// counts these calls (grpc_method="unknown").
#ifndef REACH_SERVER_UNKNOWN_METHOD_H_
#define REACH_SERVER_UNKNOWN_METHOD_H_

#include "grpcpp/generic/async_generic_service.h"

namespace reach {

class UnknownMethodService final : public grpc::CallbackGenericService {
 public:
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override;
};

}  // namespace reach

#endif  // REACH_SERVER_UNKNOWN_METHOD_H_
