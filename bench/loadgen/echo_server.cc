// orrery-echo: the floor for orrery-loadgen's serving-overhead scenario. A
// gRPC server of the same Open Inference Protocol service whose ModelInfer
// returns its inputs as outputs: same payload, same protobuf and gRPC work,
// no scheduling, execution or metering. Its one response parameter,
// `orrery_arrival_steady_ns`, is when the handler ran (as orreryd's).
//   orrery-echo --listen 127.0.0.1:0 --port-file FILE [--api sync|callback|async]
// Three of gRPC's server APIs, so that the floor is the fastest plain one on
// this machine (orreryd serves ModelInfer with the async API): `sync`, a
// handler on a gRPC thread pool's thread; `callback`, a reactor finished on
// the thread that received the request; `async`, one thread that serves a
// completion queue and answers each request as it takes it.
#include <chrono>
#include <fstream>
#include <iostream>
#include <list>
#include <string>

#include <CLI/CLI.hpp>
#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>

#include "api/proto/grpc_predict_v2.grpc.pb.h"

namespace {

void Echo(const inference::ModelInferRequest& request, inference::ModelInferResponse* response) {
  // When the handler ran, on the clock orreryd stamps its arrivals with, so
  // that orrery-loadgen splits the echo's round trip as it splits orreryd's.
  const auto arrival = std::chrono::steady_clock::now().time_since_epoch();
  (*response->mutable_parameters())["orrery_arrival_steady_ns"].set_int64_param(
      std::chrono::duration_cast<std::chrono::nanoseconds>(arrival).count());
  response->set_model_name(request.model_name());
  response->set_id(request.id());
  for (int i = 0; i < request.inputs_size(); ++i) {
    auto* out = response->add_outputs();
    out->set_name(request.inputs(i).name());
    out->set_datatype(request.inputs(i).datatype());
    *out->mutable_shape() = request.inputs(i).shape();
  }
  *response->mutable_raw_output_contents() = request.raw_input_contents();
}

class SyncEcho final : public inference::GRPCInferenceService::Service {
 public:
  grpc::Status ModelInfer(grpc::ServerContext*, const inference::ModelInferRequest* request,
                          inference::ModelInferResponse* response) override {
    Echo(*request, response);
    return grpc::Status::OK;
  }
};

class CallbackEcho final : public inference::GRPCInferenceService::CallbackService {
 public:
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override {
    Echo(*request, response);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

// The async API: one thread serves a completion queue, asks for each next
// call and answers it inline, so a request never changes threads. Serves
// until the process is killed (the bench's echo never shuts down cleanly).
class AsyncEcho {
 public:
  void Serve(grpc::ServerCompletionQueue* cq) {
    std::list<Call> calls;  // one asked-for call at a time, plus the ones answering
    auto ask = [&] {
      Call& c = calls.emplace_back();
      c.self = std::prev(calls.end());
      service.RequestModelInfer(&c.ctx, &c.request, &c.responder, cq, cq, &c);
    };
    ask();
    void* tag = nullptr;
    bool ok = false;
    while (cq->Next(&tag, &ok)) {
      Call& c = *static_cast<Call*>(tag);
      if (!ok || c.answered) {
        calls.erase(c.self);
        continue;
      }
      ask();
      Echo(c.request, &c.response);
      c.answered = true;
      c.responder.Finish(c.response, grpc::Status::OK, &c);
    }
  }
  inference::GRPCInferenceService::AsyncService service;

 private:
  struct Call {
    grpc::ServerContext ctx;
    inference::ModelInferRequest request;
    inference::ModelInferResponse response;
    grpc::ServerAsyncResponseWriter<inference::ModelInferResponse> responder{&ctx};
    bool answered = false;
    std::list<Call>::iterator self;
  };
};

}  // namespace

int main(int argc, char** argv) {
  std::string listen = "127.0.0.1:0";
  std::string port_file;
  std::string api = "sync";
  CLI::App app{"orrery-echo: Open Inference Protocol echo server (bench floor)"};
  app.add_option("--listen", listen, "HOST:PORT (port 0 picks a free one)")->capture_default_str();
  app.add_option("--port-file", port_file, "Write the bound HOST:PORT to this file once serving");
  app.add_option("--api", api, "gRPC server API: sync or callback")
      ->check(CLI::IsMember({"sync", "callback", "async"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  // The same gRPC as orreryd's, set up alike (api/server.cc): no lock-order
  // graph in Debian's debug-mode Abseil.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  SyncEcho sync_service;
  CallbackEcho callback_service;
  AsyncEcho async_echo;
  std::unique_ptr<grpc::ServerCompletionQueue> async_cq;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(64 << 20);
  if (api == "sync") {
    builder.RegisterService(&sync_service);
  } else if (api == "async") {
    builder.RegisterService(&async_echo.service);
    async_cq = builder.AddCompletionQueue();
  } else {
    builder.RegisterService(&callback_service);
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::cerr << "orrery-echo: cannot listen on " << listen << "\n";
    return 1;
  }
  const std::string host = listen.substr(0, listen.rfind(':'));
  if (!port_file.empty()) {
    std::ofstream(port_file + ".tmp") << host << ":" << port << "\n";
    std::rename((port_file + ".tmp").c_str(), port_file.c_str());
  }
  std::cout << "orrery-echo (" << api << " API) listening on " << host << ":" << port << std::endl;
  if (async_cq != nullptr) async_echo.Serve(async_cq.get());
  server->Wait();
  return 0;
}
