#include "bench/loadgen/cold_start.h"

#include <chrono>
#include <cstdio>
#include <sstream>

#include "bench/loadgen/server_calls.h"

namespace orrery::loadgen {
namespace {

double ParamMs(const inference::ModelInferResponse& r, const char* name) {
  auto it = r.parameters().find(name);
  return it == r.parameters().end() ? -1 : static_cast<double>(it->second.int64_param()) / 1e6;
}

// One timed inference: client latency in ms.
grpc::Status TimedInfer(inference::GRPCInferenceService::Stub* infer, const std::string& api_key,
                        const inference::ModelInferRequest& request, inference::ModelInferResponse* response,
                        double* ms) {
  grpc::ClientContext ctx;
  WithAuth(&ctx, api_key);
  const auto start = std::chrono::steady_clock::now();
  grpc::Status s = infer->ModelInfer(&ctx, request, response);
  *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return s;
}

}  // namespace

grpc::Status MeasureColdStarts(v1::AdminService::Stub* admin, const std::string& admin_token,
                               inference::GRPCInferenceService::Stub* infer, const std::string& tenant,
                               const std::string& api_key, const inference::ModelInferRequest& request, int cycles,
                               std::vector<ColdStart>* out) {
  for (int i = 0; i < cycles; ++i) {
    ColdStart c;
    v1::CacheModelRequest evict;
    evict.set_tenant(tenant);
    evict.set_model(request.model_name());
    v1::CacheModelResponse evicted;
    grpc::ClientContext ctx;
    WithAuth(&ctx, admin_token);
    grpc::Status s = admin->CacheEvict(&ctx, evict, &evicted);
    if (!s.ok()) return s;
    if (evicted.entry().state() != "absent") {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "model still " + evicted.entry().state());
    }
    c.segment_bytes = static_cast<double>(evicted.entry().size_bytes());
    inference::ModelInferResponse cold, warm;
    if (s = TimedInfer(infer, api_key, request, &cold, &c.cold_ms); !s.ok()) return s;
    c.load_wait_ms = ParamMs(cold, "orrery_load_wait_ns");
    c.load_predicted_ms = ParamMs(cold, "orrery_load_predicted_ns");
    c.cold_lane_ms = ParamMs(cold, "orrery_lane_ns");
    if (s = TimedInfer(infer, api_key, request, &warm, &c.warm_ms); !s.ok()) return s;
    c.warm_lane_ms = ParamMs(warm, "orrery_lane_ns");
    out->push_back(c);
  }
  return grpc::Status::OK;
}

std::string ColdStartJson(const std::string& model, const std::vector<ColdStart>& runs) {
  std::ostringstream o;
  o << "{\"model\":\"" << model << "\",\"cycles\":[";
  for (size_t i = 0; i < runs.size(); ++i) {
    const ColdStart& c = runs[i];
    o << (i ? "," : "") << "{\"segment_bytes\":" << c.segment_bytes << ",\"cold_ms\":" << c.cold_ms
      << ",\"load_wait_ms\":" << c.load_wait_ms << ",\"load_predicted_ms\":" << c.load_predicted_ms
      << ",\"cold_lane_ms\":" << c.cold_lane_ms << ",\"warm_ms\":" << c.warm_ms
      << ",\"warm_lane_ms\":" << c.warm_lane_ms << "}";
  }
  o << "]}";
  return o.str();
}

std::string ColdStartTable(const std::string& model, const std::vector<ColdStart>& runs) {
  std::ostringstream o;
  char buf[256];
  o << "cold starts of " << model << " (ms):\n";
  std::snprintf(buf, sizeof(buf), "%5s %12s %9s %10s %10s %9s %9s %9s\n", "cycle", "bytes", "cold", "load_wait",
                "load_pred", "cold_lane", "warm", "warm_lane");
  o << buf;
  for (size_t i = 0; i < runs.size(); ++i) {
    const ColdStart& c = runs[i];
    std::snprintf(buf, sizeof(buf), "%5zu %12.0f %9.3f %10.3f %10.3f %9.3f %9.3f %9.3f\n", i, c.segment_bytes,
                  c.cold_ms, c.load_wait_ms, c.load_predicted_ms, c.cold_lane_ms, c.warm_ms, c.warm_lane_ms);
    o << buf;
  }
  return o.str();
}

}  // namespace orrery::loadgen
