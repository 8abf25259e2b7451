#include "bench/loadgen/server_calls.h"

#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "tests/common/http_client.h"

namespace orrery::loadgen {

grpc::ClientContext* WithAuth(grpc::ClientContext* ctx, const std::string& secret) {
  ctx->AddMetadata("authorization", "Bearer " + secret);
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  return ctx;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

grpc::Status Upload(v1::ModelService::Stub* stub, const std::string& key, const std::string& name,
                    const std::string& bytes) {
  grpc::ClientContext ctx;
  WithAuth(&ctx, key);
  v1::UploadModelResponse resp;
  auto writer = stub->UploadModel(&ctx, &resp);
  v1::UploadModelRequest msg;
  msg.mutable_header()->set_name(name);
  constexpr size_t kChunk = 1 << 20;
  size_t off = 0;
  do {
    msg.set_chunk(bytes.substr(off, kChunk));
    off += kChunk;
    if (!writer->Write(msg)) break;
    msg.clear_header();
  } while (off < bytes.size());
  writer->WritesDone();
  return writer->Finish();
}

grpc::Status BuildRequest(v1::ModelService::Stub* stub, const std::string& key, const std::string& model,
                          inference::ModelInferRequest* req) {
  grpc::ClientContext ctx;
  WithAuth(&ctx, key);
  v1::DescribeModelRequest dreq;
  dreq.set_name(model);
  v1::DescribeModelResponse dresp;
  grpc::Status st = stub->DescribeModel(&ctx, dreq, &dresp);
  if (!st.ok()) return st;
  req->set_model_name(model);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (const v1::TensorInfo& in : dresp.model().inputs()) {
    if (in.datatype() != "FP32") {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "model '" + model + "' input '" + in.name() + "' is " + in.datatype() + ", only FP32 is generated");
    }
    auto* t = req->add_inputs();
    t->set_name(in.name());
    t->set_datatype("FP32");
    int64_t n = 1;
    for (int64_t d : in.shape()) {
      const int64_t dim = d < 0 ? 1 : d;
      t->add_shape(dim);
      n *= dim;
    }
    std::string raw(static_cast<size_t>(n) * sizeof(float), '\0');
    for (int64_t i = 0; i < n; ++i) {
      float v = dist(rng);
      std::memcpy(raw.data() + i * 4, &v, 4);
    }
    req->add_raw_input_contents(std::move(raw));
  }
  return grpc::Status::OK;
}

grpc::Status SchedulerStats(v1::AdminService::Stub* admin, const std::string& token,
                            v1::SchedulerStatsResponse* out) {
  grpc::ClientContext ctx;
  WithAuth(&ctx, token);
  return admin->SchedulerStats(&ctx, v1::SchedulerStatsRequest(), out);
}

grpc::Status HostCacheInfo(v1::AdminService::Stub* admin, const std::string& token, v1::CacheTierInfo* out) {
  grpc::ClientContext ctx;
  WithAuth(&ctx, token);
  v1::CacheListRequest req;
  req.set_tier("host");
  v1::CacheListResponse resp;
  grpc::Status s = admin->CacheList(&ctx, req, &resp);
  if (!s.ok()) return s;
  if (resp.tiers_size() == 0) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no host cache tier");
  *out = resp.tiers(0);
  return grpc::Status::OK;
}

std::map<std::string, double> AdmittedMisses(const std::string& metrics_address) {
  std::map<std::string, double> out;
  if (metrics_address.empty()) return out;
  std::istringstream text(testing::HttpExchange(metrics_address, "GET /metrics HTTP/1.1\r\nHost: loadgen\r\n\r\n"));
  const std::string prefix = "orrery_admitted_misses_total{";
  for (std::string line; std::getline(text, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    const size_t close = line.find('}');
    if (close == std::string::npos) continue;
    const double value = std::strtod(line.c_str() + close + 1, nullptr);
    // Labels: name="value",...
    std::istringstream labels(line.substr(prefix.size(), close - prefix.size()));
    for (std::string kv; std::getline(labels, kv, ',');) {
      const size_t eq = kv.find('=');
      if (eq == std::string::npos || kv.size() < eq + 3) continue;
      out["miss_" + kv.substr(0, eq) + "_" + kv.substr(eq + 2, kv.size() - eq - 3)] += value;
    }
  }
  return out;
}

}  // namespace orrery::loadgen
