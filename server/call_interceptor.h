// What every call the server takes passes through before and after its
// handler (a gRPC server interceptor), for what no handler sees:
//
// - A unary IkService request that does not parse never reaches its
//   handler: gRPC's callback handler answers UNIMPLEMENTED with an empty
//   message. The interceptor rewrites that status to INVALID_ARGUMENT
//   naming the message type ("request: not a valid reach.v1.SolveRequest").
// - Calls no IkService handler counts: those whose request did not parse,
//   and every call of the other services (health, reflection, unknown
//   methods; see Rpc in metrics.h), with their messages. IkService calls
//   whose handler ran are left to the handler. (A request over
//   --max_message_bytes never gets this far: gRPC's core answers it
//   RESOURCE_EXHAUSTED before any C++ code, interceptor or handler, sees
//   the call, so it is not counted here; reach_transport_calls_total,
//   read from channelz, counts it with every call the transport accepted.)
// - A status message longer than kMaxStatusMessageBytes (one that echoes
//   a long client string) is cut (ClientString): the client would get
//   RESOURCE_EXHAUSTED instead of a message over its metadata limit (8 KiB).
//
// SolveStream calls get no interceptor (its handler always runs and counts
// the call; its frames pass untouched).
#ifndef REACH_SERVER_CALL_INTERCEPTOR_H_
#define REACH_SERVER_CALL_INTERCEPTOR_H_

#include "grpcpp/support/server_interceptor.h"
#include "server/metrics.h"

namespace reach {

inline constexpr size_t kMaxStatusMessageBytes = 1024;

class CallInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // `metrics` must outlive the server.
  explicit CallInterceptorFactory(Metrics* metrics) : metrics_(metrics) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  Metrics* const metrics_;
};

}  // namespace reach

#endif  // REACH_SERVER_CALL_INTERCEPTOR_H_
