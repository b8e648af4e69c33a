#include "server/health.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "wire/convert.h"

namespace reach {
namespace {

using grpc::health::v1::HealthCheckResponse;

bool Known(const std::string& service) {
  return service.empty() || service == "reach.v1.IkService" ||
         service == "reach.v1.RetargetService" ||
         service == kRegistryHealthName;
}

}  // namespace

// One open Watch call. It writes one status at a time: a change that
// arrives while a write is in flight replaces any change still waiting, so
// the client always ends on the latest status. After Close() it writes what
// is waiting, then finishes.
class HealthService::WatchReactor final
    : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  WatchReactor(HealthService* service, std::string name)
      : service_(service), name_(std::move(name)), known_(Known(name_)) {}

  // Whether it watches a known name (the others stay SERVICE_UNKNOWN).
  bool known() const { return known_; }
  const std::string& name() const { return name_; }

  // Writes `status` (now, or after the write in flight).
  void Update(Status status) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    if (writing_) {
      waiting_ = status;
      has_waiting_ = true;
      return;
    }
    WriteLocked(status);
  }

  // Finishes the call once what is waiting has been written.
  void Close() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    closing_ = true;
    if (!writing_) {
      FinishLocked(
          grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
    }
  }

  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {  // The call is gone.
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
    } else if (has_waiting_) {
      has_waiting_ = false;
      WriteLocked(waiting_);
    } else if (closing_) {
      FinishLocked(
          grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
    }
  }

  void OnCancel() override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    FinishLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    service_->WatchDone(this);
    delete this;
  }

 private:
  void WriteLocked(Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    response_.set_status(status);
    writing_ = true;
    StartWrite(&response_);
  }

  void FinishLocked(const grpc::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  HealthService* const service_;
  const std::string name_;
  const bool known_;
  absl::Mutex mu_;
  HealthCheckResponse response_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool has_waiting_ ABSL_GUARDED_BY(mu_) = false;
  Status waiting_ ABSL_GUARDED_BY(mu_) = HealthCheckResponse::UNKNOWN;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

HealthService::~HealthService() {
  absl::MutexLock lock(&mu_);
  while (!watches_.empty()) no_watches_.Wait(&mu_);
}

HealthService::Status HealthService::StatusOfLocked(
    const std::string& service) const {
  if (!Known(service)) return HealthCheckResponse::SERVICE_UNKNOWN;
  const bool serving =
      serving_ && (service != kRegistryHealthName || registry_writable_);
  return serving ? HealthCheckResponse::SERVING
                 : HealthCheckResponse::NOT_SERVING;
}

void HealthService::SetRegistryWritable(bool writable) {
  absl::MutexLock lock(&mu_);
  if (shut_down_ || registry_writable_ == writable) return;
  registry_writable_ = writable;
  for (WatchReactor* watch : watches_) {
    if (watch->name() == kRegistryHealthName) {
      watch->Update(StatusOfLocked(watch->name()));
    }
  }
}

void HealthService::SetServing(bool serving) {
  absl::MutexLock lock(&mu_);
  if (shut_down_ || serving_ == serving) return;
  serving_ = serving;
  // Reactors are deleted only after WatchDone, which takes mu_.
  for (WatchReactor* watch : watches_) {
    if (!watch->known()) continue;
    watch->Update(StatusOfLocked(watch->name()));
  }
}

void HealthService::Shutdown() {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  shut_down_ = true;
  const bool was_serving = serving_;
  serving_ = false;
  for (WatchReactor* watch : watches_) {
    if (was_serving && watch->known()) {
      watch->Update(HealthCheckResponse::NOT_SERVING);
    }
    watch->Close();
  }
}

int HealthService::watches() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(watches_.size());
}

grpc::ServerUnaryReactor* HealthService::Check(
    grpc::CallbackServerContext* context,
    const grpc::health::v1::HealthCheckRequest* request,
    HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  Status status;
  {
    absl::MutexLock lock(&mu_);
    status = StatusOfLocked(request->service());
  }
  if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
    reactor->Finish(
        grpc::Status(grpc::StatusCode::NOT_FOUND,
                     absl::StrCat("service: unknown service '",
                                  ClientString(request->service()),
                                  "'; known: '', 'reach.v1.IkService', "
                                  "'reach.v1.RetargetService' and '",
                                  kRegistryHealthName, "'")));
    return reactor;
  }
  response->set_status(status);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(
    grpc::CallbackServerContext* /*context*/,
    const grpc::health::v1::HealthCheckRequest* request) {
  auto* watch = new WatchReactor(this, request->service());
  absl::MutexLock lock(&mu_);
  watches_.insert(watch);
  watch->Update(StatusOfLocked(request->service()));
  if (shut_down_) watch->Close();
  return watch;
}

void HealthService::WatchDone(WatchReactor* watch) {
  absl::MutexLock lock(&mu_);
  watches_.erase(watch);
  if (watches_.empty()) no_watches_.SignalAll();
}

}  // namespace reach
