// inference.GRPCInferenceService: the Open Inference Protocol (KServe v2).
// Model names resolve within the caller's tenant; ServerLive, ServerReady and
// ServerMetadata need no key (health probes), everything else does.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "api/miss_causes.h"
#include "api/proto/grpc_predict_v2.grpc.pb.h"
#include "api/service_context.h"

namespace orrery {

// ModelInfer uses gRPC's callback API (the other methods the synchronous
// one): the handler returns once the request is queued, and the lane that
// ran it answers, so no thread blocks while it waits or runs.
class InferenceServiceImpl final
    : public inference::GRPCInferenceService::WithCallbackMethod_ModelInfer<inference::GRPCInferenceService::Service> {
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
  // Validates, admits and queues the request and returns; the scheduler's
  // callback (on the lane that ran it) meters and answers it.
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override;

 private:
  struct Call;
  // Everything up to Submit: an error is the answer; OK means submitted
  // (the scheduler's callback then runs Complete and Answer).
  grpc::Status Start(const std::shared_ptr<Call>& call);
  // Start's second half, from waiting for the model's weights (on a serving
  // thread when they must load) to Submit.
  grpc::Status Queue(const std::shared_ptr<Call>& call);
  // After the lane (on the lane or a serving thread): miss counting, the
  // response, then the ledger entry handed to the ledger writer, whose
  // thread answers once the entry is written (Billed). Never waits on disk.
  void Complete(const std::shared_ptr<Call>& call);
  // The answer once the ledger append ended: its error, the run's error,
  // or the encoded response.
  grpc::Status Billed(Call& call, const Result<bool>& billed);
  // Releases what the call held, sends the answer, then logs the request
  // and counts its metrics (the Call outlives Finish: callers hold it).
  void Answer(Call& call, const grpc::Status& status);
  // The caller's model record for (name, version string; "" = latest), and
  // the caller's tenant into *tenant_out when given.
  Result<ModelRecord> Resolve(const grpc::ServerContextBase& context, const std::string& name,
                              const std::string& version, TenantRecord* tenant_out = nullptr) const;
  // An admitted request missed its deadline: counted by cause
  // (metrics: orrery_admitted_misses_total) and logged at debug level.
  void CountMiss(const ModelRecord& record, const LoadTrace& trace, MissHow how) const;
  // A load or room wait this much later than predicted is a cause.
  static constexpr int64_t kMissToleranceNs = 1'000'000;

  ServiceContext* ctx_;
};

}  // namespace orrery
