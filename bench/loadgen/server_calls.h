// orrery-loadgen's setup calls to orreryd: authenticated unary calls with a
// 120 s deadline, a chunked model upload, an inference request built from a
// model's declared inputs, the admin scheduler stats. Each blocks for one
// round trip (an upload for the whole model).
#pragma once

#include <map>
#include <string>

#include <grpcpp/grpcpp.h>

#include "api/proto/grpc_predict_v2.pb.h"
#include "api/proto/orrery.grpc.pb.h"

namespace orrery::loadgen {

// Adds `authorization: Bearer <secret>` and a 120 s deadline; returns ctx.
grpc::ClientContext* WithAuth(grpc::ClientContext* ctx, const std::string& secret);

// The whole file; "" when it cannot be read.
std::string ReadAll(const std::string& path);

// Client-streaming upload in 1 MiB chunks.
grpc::Status Upload(v1::ModelService::Stub* stub, const std::string& key, const std::string& name,
                    const std::string& bytes);

// A request of the model's declared inputs (dynamic dimensions as 1), FP32
// pseudo-random values (fixed seed), so that every request carries the same
// payload. INVALID_ARGUMENT for a non-FP32 input.
grpc::Status BuildRequest(v1::ModelService::Stub* stub, const std::string& key, const std::string& model,
                          inference::ModelInferRequest* req);

grpc::Status SchedulerStats(v1::AdminService::Stub* admin, const std::string& token,
                            v1::SchedulerStatsResponse* out);

// The host tier's counters (AdminService.CacheList, tier "host").
grpc::Status HostCacheInfo(v1::AdminService::Stub* admin, const std::string& token, v1::CacheTierInfo* out);

// orreryd's orrery_admitted_misses_total samples (api/miss_causes.h), scraped
// from http://metrics_address/metrics, summed by each label: "miss_how_<how>",
// "miss_cause_<cause>", "miss_state_<state>" (admitted requests that then
// missed their deadline). Empty when nothing could be scraped.
std::map<std::string, double> AdmittedMisses(const std::string& metrics_address);

}  // namespace orrery::loadgen
