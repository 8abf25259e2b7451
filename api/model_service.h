// orrery.v1.ModelService: a tenant's own models (upload, list, describe,
// delete). Names resolve within the caller's tenant only.
#pragma once

#include "api/proto/orrery.grpc.pb.h"
#include "api/service_context.h"

namespace orrery {

class ModelServiceImpl final : public orrery::v1::ModelService::Service {
 public:
  explicit ModelServiceImpl(ServiceContext* ctx) : ctx_(ctx) {}

  // Reads chunks until the stream ends, refusing as soon as the size limit is
  // passed; validates and compiles the model, then stores it atomically.
  grpc::Status UploadModel(grpc::ServerContext* context, grpc::ServerReader<v1::UploadModelRequest>* reader,
                           v1::UploadModelResponse* response) override;
  grpc::Status ListModels(grpc::ServerContext* context, const v1::ListModelsRequest* request,
                          v1::ListModelsResponse* response) override;
  grpc::Status DescribeModel(grpc::ServerContext* context, const v1::DescribeModelRequest* request,
                             v1::DescribeModelResponse* response) override;
  grpc::Status DeleteModel(grpc::ServerContext* context, const v1::DeleteModelRequest* request,
                           v1::DeleteModelResponse* response) override;

 private:
  ServiceContext* ctx_;
};

}  // namespace orrery
