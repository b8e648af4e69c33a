// Statuses and checks the services' handlers share.
#ifndef REACH_SERVER_CALL_STATUS_H_
#define REACH_SERVER_CALL_STATUS_H_

#include <chrono>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "server/memory_budget.h"

namespace reach {

inline bool DeadlinePassed(const grpc::CallbackServerContext* context) {
  return context->deadline() <= std::chrono::system_clock::now();
}

inline const grpc::Status& DeadlineBeforeSolve() {
  static const grpc::Status* status = new grpc::Status(
      grpc::StatusCode::DEADLINE_EXCEEDED,
      "the deadline passed before a solver thread was free");
  return *status;
}

inline const grpc::Status& Cancelled() {
  static const grpc::Status* status = new grpc::Status(
      grpc::StatusCode::CANCELLED, "the call was cancelled");
  return *status;
}

// An answer about the request or the caller, not a fault of the server's:
// not logged.
inline bool IsClientError(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kAborted:  // A lost race (an update's version).
      return true;
    default:
      return false;
  }
}

inline grpc::Status OverBudget(const MemoryBudget& budget, int64_t bytes) {
  if (budget.parent() != nullptr) {
    if (budget.limit() > 0 && budget.used() + bytes > budget.limit()) {
      return grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("this caller's calls hold ", budget.used(), " of its ",
                       budget.limit(), " bytes (its share of "
                       "--max_buffered_bytes: --max_buffered_bytes_per_caller)"
                       "; this call needs ", bytes, "; read the answers of "
                       "calls in flight, or retry with backoff"));
    }
    return OverBudget(*budget.parent(), bytes);
  }
  return grpc::Status(
      grpc::StatusCode::RESOURCE_EXHAUSTED,
      absl::StrCat("the server's buffers are full (", budget.used(), " of ",
                   budget.limit(), " bytes held, --max_buffered_bytes; this "
                   "call needs ", bytes, "); retry with backoff"));
}

}  // namespace reach

#endif  // REACH_SERVER_CALL_STATUS_H_
