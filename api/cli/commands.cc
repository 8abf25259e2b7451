#include "api/cli/commands.h"

#include <unistd.h>

#include <cinttypes>
#include <cmath>
#include <type_traits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include "api/proto/grpc_predict_v2.grpc.pb.h"
#include "api/cli/common.h"
#include "api/proto/orrery.grpc.pb.h"
#include "base/json.h"
#include "runtime/tensor.h"
#include "runtime/tensor_proto.h"

namespace orrery::cli {
namespace {

constexpr size_t kChunkBytes = 1 << 20;

std::string ShapeText(const google::protobuf::RepeatedField<int64_t>& shape) {
  std::string s = "[";
  for (int i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void PrintModel(const v1::ModelInfo& m) {
  std::cout << "model    " << m.name() << "\nversion  " << m.version() << "\nsize     " << m.size_bytes()
            << " bytes\nsha256   " << m.sha256() << "\nopset    " << m.opset() << "\nnodes    " << m.node_count()
            << "\n";
  for (const auto& t : m.inputs()) std::cout << "input    " << t.name() << "  " << t.datatype() << "  " << ShapeText(t.shape()) << "\n";
  for (const auto& t : m.outputs()) std::cout << "output   " << t.name() << "  " << t.datatype() << "  " << ShapeText(t.shape()) << "\n";
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot open '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One progress line on a terminal, redrawn in place; silent otherwise.
class Progress {
 public:
  explicit Progress(uint64_t total) : total_(total), tty_(isatty(STDERR_FILENO)) {}
  void Update(uint64_t done) {
    if (!tty_ || total_ == 0) return;
    int pct = static_cast<int>(done * 100 / total_);
    if (pct == last_) return;
    last_ = pct;
    int bar = pct * 30 / 100;
    std::fprintf(stderr, "\r[%.*s%*s] %3d%%  %.1f/%.1f MB", bar, "##############################", 30 - bar, "", pct,
                 done / 1e6, total_ / 1e6);
    std::fflush(stderr);
  }
  void Finish() {
    if (tty_ && last_ >= 0) std::fprintf(stderr, "\n");
  }

 private:
  uint64_t total_;
  bool tty_;
  int last_ = -1;
};

template <typename T>
void AppendValues(const Tensor& t, std::ostream& os, int64_t limit) {
  const T* p = t.data<T>();
  int64_t n = std::min(t.num_elements(), limit);
  for (int64_t i = 0; i < n; ++i) {
    const bool json = limit == INT64_MAX;
    if (i) os << (json ? "," : " ");
    if constexpr (std::is_floating_point_v<T>) {
      if (json && !std::isfinite(p[i])) {  // JSON has no NaN / Infinity
        os << "null";
        continue;
      }
    }
    if constexpr (sizeof(T) == 1) os << static_cast<int>(p[i]); else os << p[i];
  }
  if (n < t.num_elements()) os << " ...";
}

void WriteValues(const Tensor& t, std::ostream& os, int64_t limit) {
  switch (t.dtype()) {
    case DType::kFloat32: AppendValues<float>(t, os, limit); break;
    case DType::kFloat64: AppendValues<double>(t, os, limit); break;
    case DType::kInt64: AppendValues<int64_t>(t, os, limit); break;
    case DType::kInt32: AppendValues<int32_t>(t, os, limit); break;
    case DType::kInt8: AppendValues<int8_t>(t, os, limit); break;
    case DType::kUint8: AppendValues<uint8_t>(t, os, limit); break;
    case DType::kBool: AppendValues<bool>(t, os, limit); break;
    default: os << "(" << t.byte_size() << " bytes)"; break;
  }
}

std::string SafeFileName(const std::string& name) {
  std::string out;
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') ? c : '_';
  if (out.empty() || out[0] == '.') out = "_" + out;
  return out;
}

}  // namespace

int ModelUpload(const GlobalOptions& g, const std::string& name, const std::string& file,
                const std::string& upload_id) {
  if (!NeedKey(g)) return 1;
  Result<std::string> bytes = ReadFile(file);
  if (!bytes.ok()) return Fail(bytes.status().message());
  auto stub = v1::ModelService::NewStub(Connect(g));
  grpc::ClientContext ctx;
  Authorize(&ctx, g.api_key);
  v1::UploadModelResponse resp;
  auto writer = stub->UploadModel(&ctx, &resp);
  Progress progress(bytes->size());
  v1::UploadModelRequest msg;
  msg.mutable_header()->set_name(name);
  msg.mutable_header()->set_total_size_bytes(bytes->size());
  msg.mutable_header()->set_upload_id(upload_id);
  size_t offset = 0;
  do {
    size_t n = std::min(kChunkBytes, bytes->size() - offset);
    msg.set_chunk(bytes->substr(offset, n));
    if (!writer->Write(msg)) break;  // the server ended the stream; Finish() says why
    offset += n;
    progress.Update(offset);
    msg.clear_header();
  } while (offset < bytes->size());
  writer->WritesDone();
  grpc::Status s = writer->Finish();
  progress.Finish();
  if (!s.ok()) return Fail(s, g);
  if (g.json) {
    std::cout << ToJson(resp) << "\n";
  } else {
    std::cout << (resp.replayed() ? "already uploaded " : "uploaded ") << resp.model().name() << " version "
              << resp.model().version() << " (" << resp.model().size_bytes() << " bytes)\n";
    PrintModel(resp.model());
  }
  return 0;
}

int ModelList(const GlobalOptions& g) {
  if (!NeedKey(g)) return 1;
  auto stub = v1::ModelService::NewStub(Connect(g));
  grpc::ClientContext ctx;
  Authorize(&ctx, g.api_key);
  v1::ListModelsResponse resp;
  grpc::Status s = stub->ListModels(&ctx, v1::ListModelsRequest(), &resp);
  if (!s.ok()) return Fail(s, g);
  if (g.json) {
    std::cout << ToJson(resp) << "\n";
    return 0;
  }
  std::printf("%-32s %8s %12s  %s\n", "NAME", "VERSION", "BYTES", "SHA256");
  for (const auto& m : resp.models()) {
    std::printf("%-32s %8" PRIu64 " %12" PRIu64 "  %.16s\n", m.name().c_str(), m.version(), m.size_bytes(),
                m.sha256().c_str());
  }
  return 0;
}

int ModelShow(const GlobalOptions& g, const std::string& name, uint64_t version) {
  if (!NeedKey(g)) return 1;
  auto stub = v1::ModelService::NewStub(Connect(g));
  grpc::ClientContext ctx;
  Authorize(&ctx, g.api_key);
  v1::DescribeModelRequest req;
  req.set_name(name);
  req.set_version(version);
  v1::DescribeModelResponse resp;
  grpc::Status s = stub->DescribeModel(&ctx, req, &resp);
  if (!s.ok()) return Fail(s, g);
  if (g.json) {
    std::cout << ToJson(resp) << "\n";
  } else {
    PrintModel(resp.model());
  }
  return 0;
}

int ModelDelete(const GlobalOptions& g, const std::string& name, uint64_t version) {
  if (!NeedKey(g)) return 1;
  auto stub = v1::ModelService::NewStub(Connect(g));
  grpc::ClientContext ctx;
  Authorize(&ctx, g.api_key);
  v1::DeleteModelRequest req;
  req.set_name(name);
  req.set_version(version);
  v1::DeleteModelResponse resp;
  grpc::Status s = stub->DeleteModel(&ctx, req, &resp);
  if (!s.ok()) return Fail(s, g);
  std::string versions;
  for (uint64_t v : resp.deleted_versions()) {
    if (!versions.empty()) versions.push_back(',');
    versions.append(std::to_string(v));
  }
  if (g.json) {
    std::cout << "{\"deleted\":" << JsonQuote(name) << ",\"versions\":[" << versions << "]}\n";
  } else {
    std::cout << "deleted " << name << " (versions " << versions << ")\n";
  }
  return 0;
}

int Infer(const GlobalOptions& g, const std::string& model, const std::string& version,
          const std::vector<std::string>& inputs, const std::string& output_dir, const std::string& request_id) {
  if (!NeedKey(g)) return 1;
  inference::ModelInferRequest req;
  req.set_id(request_id);
  req.set_model_name(model);
  req.set_model_version(version);
  for (const std::string& spec : inputs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) return Fail("--input '" + spec + "': expected NAME=FILE.pb");
    std::string name = spec.substr(0, eq);
    Result<std::string> bytes = ReadFile(spec.substr(eq + 1));
    if (!bytes.ok()) return Fail(bytes.status().message());
    Result<NamedTensor> t = ParseTensorProto(*bytes);
    if (!t.ok()) return Fail("--input '" + spec + "': " + t.status().message());
    auto* in = req.add_inputs();
    in->set_name(name);
    in->set_datatype(std::string(DTypeToOipName(t->tensor.dtype())));
    for (int64_t d : t->tensor.shape()) in->add_shape(d);
    req.add_raw_input_contents(std::string(t->tensor.bytes()));
  }
  auto stub = inference::GRPCInferenceService::NewStub(Connect(g));
  grpc::ClientContext ctx;
  Authorize(&ctx, g.api_key);
  inference::ModelInferResponse resp;
  grpc::Status s = stub->ModelInfer(&ctx, req, &resp);
  if (!s.ok()) return Fail(s, g);
  if (resp.raw_output_contents_size() != resp.outputs_size()) return Fail("malformed response: raw outputs missing");

  std::ostringstream json;
  json.precision(9);  // round-trips float32
  json << "{\"model_name\":" << JsonQuote(resp.model_name()) << ",\"model_version\":"
       << JsonQuote(resp.model_version()) << ",\"id\":" << JsonQuote(resp.id()) << ",\"outputs\":[";
  if (!g.json) std::cerr << "request id " << resp.id() << "\n";
  for (int i = 0; i < resp.outputs_size(); ++i) {
    const auto& o = resp.outputs(i);
    Result<Tensor> t = Tensor::FromBytes(DTypeFromOipName(o.datatype()), Shape(o.shape().begin(), o.shape().end()),
                                         resp.raw_output_contents(i));
    if (!t.ok()) return Fail("output '" + o.name() + "': " + t.status().message());
    std::string file;
    if (!output_dir.empty()) {
      std::filesystem::create_directories(output_dir);
      file = (std::filesystem::path(output_dir) / (SafeFileName(o.name()) + ".pb")).string();
      std::ofstream out(file, std::ios::binary);
      out << SerializeTensorProto(NamedTensor{o.name(), *t});
      if (!out) return Fail("cannot write '" + file + "'");
    }
    if (g.json) {
      json << (i ? "," : "") << "{\"name\":" << JsonQuote(o.name()) << ",\"datatype\":"
           << JsonQuote(o.datatype()) << ",\"shape\":" << ShapeText(o.shape());
      if (!file.empty()) json << ",\"file\":" << JsonQuote(file);
      json << ",\"data\":[";
      WriteValues(*t, json, INT64_MAX);
      json << "]}";
    } else {
      std::cout << o.name() << "  " << o.datatype() << "  " << ShapeText(o.shape());
      if (!file.empty()) std::cout << "  -> " << file;
      std::cout << "\n  ";
      WriteValues(*t, std::cout, 32);
      std::cout << "\n";
    }
  }
  if (g.json) std::cout << json.str() << "]}\n";
  return 0;
}

int Status(const GlobalOptions& g) {
  auto stub = inference::GRPCInferenceService::NewStub(Connect(g));
  inference::ServerLiveResponse live;
  inference::ServerReadyResponse ready;
  inference::ServerMetadataResponse meta;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Status s = stub->ServerLive(&ctx, inference::ServerLiveRequest(), &live);
    if (!s.ok()) return Fail(s, g);
  }
  {
    grpc::ClientContext ctx;
    if (grpc::Status s = stub->ServerReady(&ctx, inference::ServerReadyRequest(), &ready); !s.ok()) return Fail(s, g);
  }
  {
    grpc::ClientContext ctx;
    if (grpc::Status s = stub->ServerMetadata(&ctx, inference::ServerMetadataRequest(), &meta); !s.ok()) {
      return Fail(s, g);
    }
  }
  if (g.json) {
    std::cout << "{\"server\":" << JsonQuote(g.server) << ",\"live\":" << (live.live() ? "true" : "false")
              << ",\"ready\":" << (ready.ready() ? "true" : "false") << ",\"name\":" << JsonQuote(meta.name())
              << ",\"version\":" << JsonQuote(meta.version()) << "}\n";
  } else {
    std::cout << meta.name() << " " << meta.version() << " at " << g.server << ": "
              << (live.live() ? "live" : "not live") << ", " << (ready.ready() ? "ready" : "not ready") << "\n";
  }
  return 0;
}

}  // namespace orrery::cli
