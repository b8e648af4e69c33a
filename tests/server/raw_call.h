// For tests of what a well-behaved stub cannot send: a unary call of any
// method with any bytes, and the server's counters as /metrics would show
// them (read from its registry, in-process).
#ifndef REACH_TESTS_SERVER_RAW_CALL_H_
#define REACH_TESTS_SERVER_RAW_CALL_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "prometheus/metric_family.h"
#include "server/metrics.h"
#include "tests/testing/service.h"

namespace reach::testing {

// `bytes` as the request of `method` ("/package.Service/Method"); the
// response's bytes in *response (if given).
inline grpc::Status RawUnaryCall(const std::shared_ptr<grpc::Channel>& channel,
                                 const std::string& method,
                                 const std::string& bytes,
                                 std::string* response = nullptr) {
  grpc::GenericStub stub(channel);
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), reply;
  grpc::Status result;
  absl::Notification done;
  auto context = Context();
  stub.UnaryCall(context.get(), method, grpc::StubOptions(), &request, &reply,
                 [&](grpc::Status status) {
                   result = std::move(status);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (result.ok() && response != nullptr) {
    grpc::Slice joined;
    if (reply.DumpToSingleSlice(&joined).ok()) {
      response->assign(reinterpret_cast<const char*>(joined.begin()),
                       joined.size());
    } else {
      response->clear();
    }
  }
  return result;
}

// The value of the counter `family` whose labels include all of `labels`,
// summed over the children that match; 0 if none.
inline double CounterValue(Metrics& metrics, const std::string& family,
                           const std::map<std::string, std::string>& labels) {
  double sum = 0.0;
  for (const prometheus::MetricFamily& f : metrics.registry()->Collect()) {
    if (f.name != family) continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      int matched = 0;
      for (const prometheus::ClientMetric::Label& l : m.label) {
        auto it = labels.find(l.name);
        if (it != labels.end() && it->second == l.value) ++matched;
      }
      if (matched == static_cast<int>(labels.size())) sum += m.counter.value;
    }
  }
  return sum;
}

// Waits (up to a generous hang guard) until the counter reaches `want`:
// calls that no handler counted are counted when gRPC releases them, a
// moment after the client has its status. Returns the last value read.
inline double AwaitCounter(Metrics& metrics, const std::string& family,
                           const std::map<std::string, std::string>& labels,
                           double want) {
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  double value = CounterValue(metrics, family, labels);
  while (value < want && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));
    value = CounterValue(metrics, family, labels);
  }
  return value;
}

}  // namespace reach::testing

#endif  // REACH_TESTS_SERVER_RAW_CALL_H_
