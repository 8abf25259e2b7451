#include "api/health_service.h"

#include <chrono>
#include <thread>

#include "api/proto/grpc_predict_v2.grpc.pb.h"
#include "api/proto/orrery.grpc.pb.h"

namespace orrery {

using grpc::health::v1::HealthCheckResponse;

bool HealthServiceImpl::StatusOf(const std::string& service, HealthCheckResponse::ServingStatus* status) const {
  static constexpr const char* kServices[] = {
      inference::GRPCInferenceService::service_full_name(), v1::ModelService::service_full_name(),
      v1::BillingService::service_full_name(), v1::AdminService::service_full_name(),
      grpc::health::v1::Health::service_full_name()};
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
    HealthCheckResponse::ServingStatus now = HealthCheckResponse::SERVICE_UNKNOWN;  // kept for unknown names
    StatusOf(request->service(), &now);
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
