// orrery-loadgen --cold-start N: the cold-start measurement of issue 7
// (scenario 2). For one uploaded model: N times, evict it from the host cache
// (AdminService.CacheEvict), send one inference and time it (the model is
// then only on disk: the request waits for its load), then one more
// inference (warm). Each call blocks for one round trip; sequential.
#pragma once

#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "api/proto/grpc_predict_v2.grpc.pb.h"
#include "api/proto/orrery.grpc.pb.h"

namespace orrery::loadgen {

struct ColdStart {
  double segment_bytes = 0;      // what the load reads (the cache entry's size)
  double cold_ms = 0;            // client: request to response, model only on disk
  double load_wait_ms = 0;       // server: waited for the weights
  double load_predicted_ms = 0;  // server: the load's prediction when the request came
  double cold_lane_ms = 0;       // server: execution of the cold request
  double warm_ms = 0;            // client: the next request (resident)
  double warm_lane_ms = 0;
};

// `tenant` is the tenant's name (for CacheEvict), `api_key` its key.
grpc::Status MeasureColdStarts(v1::AdminService::Stub* admin, const std::string& admin_token,
                               inference::GRPCInferenceService::Stub* infer, const std::string& tenant,
                               const std::string& api_key, const inference::ModelInferRequest& request, int cycles,
                               std::vector<ColdStart>* out);

// {"model": ..., "cycles": [{...}, ...]} and a human-readable table.
std::string ColdStartJson(const std::string& model, const std::vector<ColdStart>& runs);
std::string ColdStartTable(const std::string& model, const std::vector<ColdStart>& runs);

}  // namespace orrery::loadgen
