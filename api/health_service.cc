#include "api/health_service.h"

#include <chrono>
#include <thread>

namespace orrery {

using grpc::health::v1::HealthCheckResponse;

bool HealthServiceImpl::StatusOf(const std::string& service, HealthCheckResponse::ServingStatus* status) const {
  static constexpr const char* kServices[] = {"inference.GRPCInferenceService", "orrery.v1.ModelService",
                                              "orrery.v1.BillingService", "orrery.v1.AdminService",
                                              "grpc.health.v1.Health"};
  bool known = service.empty();
  for (const char* name : kServices) known = known || service == name;
  if (!known) return false;
  *status = ctx_->ready.load() && !stopping_.load() ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
  return true;
}

grpc::Status HealthServiceImpl::Check(grpc::ServerContext*, const grpc::health::v1::HealthCheckRequest* request,
                                      HealthCheckResponse* response) {
  HealthCheckResponse::ServingStatus status = HealthCheckResponse::UNKNOWN;
  if (!StatusOf(request->service(), &status)) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service '" + request->service() + "'");
  }
  response->set_status(status);
  return grpc::Status::OK;
}

grpc::Status HealthServiceImpl::Watch(grpc::ServerContext* context, const grpc::health::v1::HealthCheckRequest* request,
                                      grpc::ServerWriter<HealthCheckResponse>* writer) {
  // As the protocol asks: an unknown name is watched as SERVICE_UNKNOWN.
  HealthCheckResponse::ServingStatus sent = HealthCheckResponse::UNKNOWN;
  for (bool first = true;; first = false) {
    HealthCheckResponse::ServingStatus now = HealthCheckResponse::SERVICE_UNKNOWN;
    if (!StatusOf(request->service(), &now)) now = HealthCheckResponse::SERVICE_UNKNOWN;
    if (first || now != sent) {
      HealthCheckResponse response;
      response.set_status(now);
      if (!writer->Write(response)) return grpc::Status::OK;  // the client went away
      sent = now;
    }
    if (stopping_.load()) return grpc::Status::OK;
    if (context->IsCancelled()) return grpc::Status::CANCELLED;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace orrery
