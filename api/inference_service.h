// inference.GRPCInferenceService: the Open Inference Protocol (KServe v2).
// Model names resolve within the caller's tenant; ServerLive, ServerReady and
// ServerMetadata need no key (health probes), everything else does.
#pragma once

#include <string>
#include <vector>

#include "api/miss_causes.h"
#include "api/proto/grpc_predict_v2.grpc.pb.h"
#include "api/service_context.h"

namespace orrery {

class InferenceServiceImpl final : public inference::GRPCInferenceService::Service {
 public:
  explicit InferenceServiceImpl(ServiceContext* ctx) : ctx_(ctx) {}

  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* response) override;
  grpc::Status ServerReady(grpc::ServerContext*, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* response) override;
  grpc::Status ServerMetadata(grpc::ServerContext*, const inference::ServerMetadataRequest*,
                              inference::ServerMetadataResponse* response) override;
  grpc::Status ModelReady(grpc::ServerContext* context, const inference::ModelReadyRequest* request,
                          inference::ModelReadyResponse* response) override;
  grpc::Status ModelMetadata(grpc::ServerContext* context, const inference::ModelMetadataRequest* request,
                             inference::ModelMetadataResponse* response) override;
  // Blocks the handler thread until a lane has run the request.
  grpc::Status ModelInfer(grpc::ServerContext* context, const inference::ModelInferRequest* request,
                          inference::ModelInferResponse* response) override;

 private:
  // ModelInfer without the metrics; fills *labels (tenant id, model name)
  // as far as it gets.
  grpc::Status Infer(grpc::ServerContext* context, const inference::ModelInferRequest* request,
                     inference::ModelInferResponse* response, std::vector<std::string>* labels);
  // The caller's model record for (name, version string; "" = latest), and
  // the caller's tenant into *tenant_out when given.
  Result<ModelRecord> Resolve(const grpc::ServerContext& context, const std::string& name,
                              const std::string& version, TenantRecord* tenant_out = nullptr) const;
  // An admitted request missed its deadline: counted by cause
  // (metrics: orrery_admitted_misses_total) and logged at debug level.
  void CountMiss(const ModelRecord& record, const LoadTrace& trace, MissHow how) const;
  // A load or room wait this much later than predicted is a cause.
  static constexpr int64_t kMissToleranceNs = 1'000'000;

  ServiceContext* ctx_;
};

}  // namespace orrery
