// Request and response of a unary callback RPC on one protobuf Arena per
// call: parsing a request and building its answer then costs a few block
// allocations instead of one heap allocation per nested message.
#ifndef REACH_SERVER_ARENA_ALLOCATOR_H_
#define REACH_SERVER_ARENA_ALLOCATOR_H_

#include "google/protobuf/arena.h"
#include "grpcpp/support/message_allocator.h"

namespace reach {

template <typename Request, typename Response>
class ArenaMessageAllocator
    : public grpc::MessageAllocator<Request, Response> {
 public:
  grpc::MessageHolder<Request, Response>* AllocateMessages() override {
    return new Holder();
  }

 private:
  class Holder : public grpc::MessageHolder<Request, Response> {
   public:
    Holder() {
      this->set_request(
          google::protobuf::Arena::CreateMessage<Request>(&arena_));
      this->set_response(
          google::protobuf::Arena::CreateMessage<Response>(&arena_));
    }
    void Release() override { delete this; }

   private:
    google::protobuf::Arena arena_;
  };
};

}  // namespace reach

#endif  // REACH_SERVER_ARENA_ALLOCATOR_H_
