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

// ModelInfer uses gRPC's asynchronous API (the other methods the synchronous
// one): a thread serving a completion queue (Serve) receives a request,
// validates, admits and queues it, and goes on to the next; the lane that
// ran it answers, so no thread blocks while it waits or runs. Why not the
// callback API: there every request changed threads ~4 times inside gRPC,
// and the front end took 15-25% more CPU per request (api/README.md).
class InferenceServiceImpl final
    : public inference::GRPCInferenceService::WithAsyncMethod_ModelInfer<inference::GRPCInferenceService::Service> {
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
  // Serves ModelInfer from `cq` (one of the server's completion queues) on
  // the calling thread until the queue is shut down and drained: each
  // request is validated, admitted and queued here, never waited for (the
  // scheduler's callback, on the lane that ran it, meters and answers it).
  // The server must be built with this service and `cq`; call Shutdown on
  // `cq` only after every answer is sent (the scheduler and the ledger
  // writer are done), so that each call's last event is drained here.
  void Serve(grpc::ServerCompletionQueue* cq);

 private:
  struct Call;
  // Asks gRPC for the next ModelInfer on `cq`.
  void RequestNext(grpc::ServerCompletionQueue* cq);
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
