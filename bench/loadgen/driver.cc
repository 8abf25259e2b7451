#include "bench/loadgen/driver.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <utility>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/proto_buffer_reader.h>

namespace orrery::loadgen {

namespace {

using Clock = std::chrono::steady_clock;

constexpr char kModelInfer[] = "/inference.GRPCInferenceService/ModelInfer";

struct Call {
  grpc::ClientContext ctx;
  grpc::ByteBuffer response_bytes;
  inference::ModelInferResponse response;  // parameters only (ParseParameters)
  grpc::Status status;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> reader;
  int stream = 0;
  Clock::time_point intended;
  Clock::time_point sent;
};

int64_t Param(const inference::ModelInferResponse& r, const char* name) {
  auto it = r.parameters().find(name);
  if (it == r.parameters().end() || it->second.parameter_choice_case() != inference::InferParameter::kInt64Param) {
    return -1;
  }
  return it->second.int64_param();
}

// Fills `out` with the response's parameters (field 4) only: the outputs
// (64+ KiB) are skipped, not copied, since the report needs none of them.
bool ParseParameters(grpc::ByteBuffer* bytes, inference::ModelInferResponse* out) {
  namespace wire = google::protobuf::internal;
  grpc::ProtoBufferReader reader(bytes);
  google::protobuf::io::CodedInputStream in(&reader);
  std::string params;
  {
    google::protobuf::io::StringOutputStream sink(&params);
    google::protobuf::io::CodedOutputStream copy(&sink);
    while (const uint32_t tag = in.ReadTag()) {
      if (wire::WireFormatLite::GetTagFieldNumber(tag) != inference::ModelInferResponse::kParametersFieldNumber ||
          wire::WireFormatLite::GetTagWireType(tag) != wire::WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
        if (!wire::WireFormatLite::SkipField(&in, tag)) return false;
        continue;
      }
      uint32_t length = 0;
      std::string entry;
      if (!in.ReadVarint32(&length) || !in.ReadString(&entry, static_cast<int>(length))) return false;
      copy.WriteTag(tag);
      copy.WriteVarint32(length);
      copy.WriteString(entry);
    }
  }
  return out->ParseFromString(params);
}

// The request's and the response's way between this client and the
// server's handler, from the server's arrival stamp (same host, same clock).
void SplitPaths(const Call& call, Clock::time_point received, Record* r) {
  const int64_t arrival = Param(call.response, "orrery_arrival_steady_ns");
  if (arrival < 0) return;
  const auto ns = [](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  };
  r->request_path_ns = arrival - ns(call.sent);
  r->response_path_ns = ns(received) - arrival - std::max<int64_t>(r->server_ns, 0);
}

class Runner {
 public:
  Runner(const std::vector<Target>& targets, const RunOptions& options) : targets_(targets), options_(options) {
    for (const Target& t : targets_) {
      stubs_.push_back(std::make_unique<grpc::GenericStub>(t.channel));
      payloads_.emplace_back();
      bool own = false;
      (void)grpc::SerializationTraits<inference::ModelInferRequest>::Serialize(t.request, &payloads_.back(), &own);
      // Sent with every call of this target: the header once, here.
      authorization_.push_back(t.api_key.empty() ? std::string() : "Bearer " + t.api_key);
    }
  }

  std::vector<Record> Run(const std::vector<Arrival>& arrivals) {
    start_ = Clock::now() + std::chrono::milliseconds(20);
    window_start_ = start_ + std::chrono::nanoseconds(options_.warmup_ns);
    end_ = window_start_ + std::chrono::nanoseconds(options_.duration_ns);
    std::vector<std::thread> pollers;
    for (int i = 0; i < std::max(options_.completion_threads, 1); ++i) pollers.emplace_back([this] { Poll(); });
    std::thread warmup_hook([this] {
      std::this_thread::sleep_until(window_start_);
      if (options_.on_warmup_end) options_.on_warmup_end();
      std::this_thread::sleep_until(end_);
      if (options_.on_window_end) options_.on_window_end();
    });
    std::this_thread::sleep_until(start_);
    for (size_t i = 0; i < targets_.size(); ++i) {
      for (int k = 0; k < targets_[i].closed; ++k) Send(static_cast<int>(i), Clock::now());
    }
    for (const Arrival& a : arrivals) {
      const Clock::time_point at = start_ + std::chrono::nanoseconds(a.at_ns);
      if (at >= end_) break;
      std::this_thread::sleep_until(at);
      Send(a.stream, at);
    }
    std::this_thread::sleep_until(end_);
    sending_done_.store(true);
    // Closed-loop streams stop re-sending after end_; wait for the rest.
    {
      std::unique_lock<std::mutex> lock(mu_);
      idle_.wait(lock, [this] { return outstanding_ == 0; });
    }
    cq_.Shutdown();
    for (std::thread& t : pollers) t.join();
    warmup_hook.join();
    return std::move(records_);
  }

 private:
  void Send(int stream, Clock::time_point intended) {
    const Target& t = targets_[static_cast<size_t>(stream)];
    auto call = std::make_unique<Call>();
    call->stream = stream;
    call->intended = intended;
    call->sent = Clock::now();
    const size_t i = static_cast<size_t>(stream);
    if (!authorization_[i].empty()) call->ctx.AddMetadata("authorization", authorization_[i]);
    // The request's deadline, from its intended send time, goes in
    // timeout_us and as the gRPC deadline, as a real client's would: the
    // server then also knows the time the call spent before its handler
    // ran (the sender's lag, the transport), and a response later than the
    // deadline is cut off here (DEADLINE_EXCEEDED, a late rejection). No
    // deadline: 60 s bounds a hung call.
    const auto due = t.deadline_us > 0 ? intended + std::chrono::microseconds(t.deadline_us)
                                       : call->sent + std::chrono::seconds(60);
    call->ctx.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::duration_cast<std::chrono::system_clock::duration>(due - call->sent));
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++outstanding_;
    }
    // The ByteBuffer copy shares the serialized request's slices.
    call->reader = stubs_[i]->PrepareUnaryCall(&call->ctx, kModelInfer, payloads_[i], &cq_);
    call->reader->StartCall();
    Call* raw = call.release();
    raw->reader->Finish(&raw->response_bytes, &raw->status, raw);
  }

  void Poll() {
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
      std::unique_ptr<Call> call(static_cast<Call*>(tag));
      const Clock::time_point now = Clock::now();
      const Target& t = targets_[static_cast<size_t>(call->stream)];
      if (call->intended >= window_start_) {
        Record r;
        r.stream = call->stream;
        r.sent_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(call->intended - window_start_).count();
        r.latency_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - call->intended).count();
        r.send_lag_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(call->sent - call->intended).count();
        r.grpc_code = static_cast<int>(call->status.error_code());
        r.deadline_us = t.deadline_us;
        r.outcome = Classify(r.grpc_code, call->status.error_message(), r.latency_ns, t.deadline_us);
        // The first few errors of each stream and outcome, whole, for a
        // reader wondering why (admission's message names the predicted
        // completion, a drop its planned one).
        if (!call->status.ok()) {
          std::lock_guard<std::mutex> lock(mu_);
          if (errors_shown_[{call->stream, r.outcome}]++ < 3) {
            std::fprintf(stderr, "orrery-loadgen: stream %d: %s: %s\n", call->stream,
                         std::to_string(static_cast<int>(call->status.error_code())).c_str(),
                         call->status.error_message().c_str());
          }
        }
        if (call->status.ok() && !ParseParameters(&call->response_bytes, &call->response)) {
          r.grpc_code = static_cast<int>(grpc::StatusCode::INTERNAL);
          r.outcome = Outcome::kError;
        } else if (call->status.ok()) {
          r.lane_ns = Param(call->response, "orrery_lane_ns");
          r.queue_ns = Param(call->response, "orrery_queue_ns");
          r.server_ns = Param(call->response, "orrery_server_ns");
          r.predicted_lane_ns = Param(call->response, "orrery_predicted_lane_ns");
          r.load_wait_ns = Param(call->response, "orrery_load_wait_ns");
          r.load_predicted_ns = Param(call->response, "orrery_load_predicted_ns");
          SplitPaths(*call, now, &r);
        }
        std::lock_guard<std::mutex> lock(mu_);
        records_.push_back(r);
      }
      if (t.closed > 0 && now < end_) Send(call->stream, now);
      std::lock_guard<std::mutex> lock(mu_);
      if (--outstanding_ == 0 && sending_done_.load()) idle_.notify_all();
    }
  }

  const std::vector<Target>& targets_;
  const RunOptions& options_;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs_;  // per target
  std::vector<grpc::ByteBuffer> payloads_;                 // per target: its request, serialized
  std::vector<std::string> authorization_;                 // per target: "Bearer KEY" or ""
  grpc::CompletionQueue cq_;
  Clock::time_point start_, window_start_, end_;
  std::atomic<bool> sending_done_{false};
  std::mutex mu_;
  std::condition_variable idle_;
  int64_t outstanding_ = 0;
  std::vector<Record> records_;
  // Per stream and outcome (the few late rejections are the interesting
  // ones, not drowned by early ones), under mu_.
  std::map<std::pair<int, Outcome>, int> errors_shown_;
};

}  // namespace

std::vector<Record> RunWorkload(const std::vector<Target>& targets, const std::vector<Arrival>& arrivals,
                                const RunOptions& options) {
  Runner runner(targets, options);
  return runner.Run(arrivals);
}

}  // namespace orrery::loadgen
