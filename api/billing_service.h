// orrery.v1.BillingService: a tenant's own billing report (authenticated by
// its API key; only its own ledger is ever read).
#pragma once

#include "api/proto/orrery.grpc.pb.h"
#include "api/service_context.h"

namespace orrery {

class BillingServiceImpl final : public orrery::v1::BillingService::Service {
 public:
  explicit BillingServiceImpl(ServiceContext* ctx) : ctx_(ctx) {}

  // Cost: one ledger range scan of the caller's tenant. INVALID_ARGUMENT
  // when request.tenant is set (that is the admin report's field).
  grpc::Status Report(grpc::ServerContext* context, const v1::BillingReportRequest* request,
                      v1::BillingReportResponse* response) override;

 private:
  ServiceContext* ctx_;
};

}  // namespace orrery
