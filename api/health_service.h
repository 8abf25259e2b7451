// grpc.health.v1.Health: SERVING while orreryd admits inferences,
// NOT_SERVING while it drains (AdminService.Drain, or shutting down), for
// the whole server ("") and for each of its services by name; any other
// name is NOT_FOUND. No key needed (probes).
#pragma once

#include <atomic>
#include <string>

#include "api/proto/health.grpc.pb.h"
#include "api/service_context.h"

namespace orrery {

class HealthServiceImpl final : public grpc::health::v1::Health::Service {
 public:
  explicit HealthServiceImpl(const ServiceContext* ctx) : ctx_(ctx) {}

  // Cost: an atomic load.
  grpc::Status Check(grpc::ServerContext* context, const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override;
  // Sends the status, then each change (checked every 100 ms), until the
  // client cancels or Stop is called; holds one of gRPC's synchronous
  // threads meanwhile.
  grpc::Status Watch(grpc::ServerContext* context, const grpc::health::v1::HealthCheckRequest* request,
                     grpc::ServerWriter<grpc::health::v1::HealthCheckResponse>* writer) override;
  // Ends every Watch after its NOT_SERVING (before the gRPC server shuts
  // down, which waits for open streams).
  void Stop() { stopping_.store(true); }

 private:
  // The status for `service`, or false for a name this server does not serve.
  bool StatusOf(const std::string& service, grpc::health::v1::HealthCheckResponse::ServingStatus* status) const;

  const ServiceContext* ctx_;
  std::atomic<bool> stopping_{false};
};

}  // namespace orrery
