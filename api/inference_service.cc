#include "api/inference_service.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <limits>
#include <set>

#include "api/auth.h"
#include "api/billing.h"
#include "api/grpc_status.h"
#include "api/model_costs.h"
#include "api/model_info.h"
#include "api/oip_tensor.h"
#include "api/version.h"
#include "runtime/inputs.h"

#include <google/protobuf/arena.h>
#include <spdlog/spdlog.h>

namespace orrery {

grpc::Status InferenceServiceImpl::ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                                              inference::ServerLiveResponse* response) {
  response->set_live(true);
  return grpc::Status::OK;
}

grpc::Status InferenceServiceImpl::ServerReady(grpc::ServerContext*, const inference::ServerReadyRequest*,
                                               inference::ServerReadyResponse* response) {
  response->set_ready(ctx_->ready.load());
  return grpc::Status::OK;
}

grpc::Status InferenceServiceImpl::ServerMetadata(grpc::ServerContext*, const inference::ServerMetadataRequest*,
                                                  inference::ServerMetadataResponse* response) {
  response->set_name("orrery");
  response->set_version(kOrreryVersion);
  return grpc::Status::OK;
}

Result<ModelRecord> InferenceServiceImpl::Resolve(const grpc::ServerContextBase& context, const std::string& name,
                                                  const std::string& version, TenantRecord* tenant_out) const {
  ORRERY_ASSIGN_OR_RETURN(TenantRecord tenant, ctx_->catalog_cache->Authenticate(BearerToken(context)));
  if (tenant_out != nullptr) *tenant_out = tenant;
  uint64_t v = 0;
  if (!version.empty()) {
    auto [end, ec] = std::from_chars(version.data(), version.data() + version.size(), v);
    if (ec != std::errc() || end != version.data() + version.size() || v == 0) {
      return Status::InvalidArgument("model version '" + version + "' is not a positive integer");
    }
  }
  return ctx_->catalog_cache->GetModel(tenant.id(), name, v);
}

grpc::Status InferenceServiceImpl::ModelReady(grpc::ServerContext* context, const inference::ModelReadyRequest* request,
                                              inference::ModelReadyResponse* response) {
  Result<ModelRecord> record = Resolve(*context, request->name(), request->version());
  if (!record.ok()) return ToGrpcStatus(record.status());
  response->set_ready(ctx_->ready.load());
  return grpc::Status::OK;
}

grpc::Status InferenceServiceImpl::ModelMetadata(grpc::ServerContext* context,
                                                 const inference::ModelMetadataRequest* request,
                                                 inference::ModelMetadataResponse* response) {
  Result<ModelRecord> record = Resolve(*context, request->name(), request->version());
  if (!record.ok()) return ToGrpcStatus(record.status());
  response->set_name(record->name());
  response->add_versions(std::to_string(record->version()));
  response->set_platform("onnx");
  auto fill = [](const storage::TensorSpecRecord& spec, inference::ModelMetadataResponse::TensorMetadata* md) {
    md->set_name(spec.name());
    md->set_datatype(OipDatatype(spec.dtype()));
    for (int64_t d : spec.shape()) md->add_shape(d);
  };
  for (const auto& in : record->inputs()) fill(in, response->add_inputs());
  for (const auto& out : record->outputs()) fill(out, response->add_outputs());
  return grpc::Status::OK;
}

namespace {

// The request's deadline on the scheduler's clock: the earlier of the gRPC
// deadline and the Open Inference Protocol parameter `timeout_us`; 0 when
// neither is set (the scheduler applies the tenant's default).
Result<int64_t> RequestDeadlineNs(const grpc::ServerContextBase& context, const inference::ModelInferRequest& request,
                                  const FairScheduler& scheduler) {
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  int64_t timeout_ns = kNone;
  auto param = request.parameters().find("timeout_us");
  if (param != request.parameters().end()) {
    if (param->second.parameter_choice_case() != inference::InferParameter::kInt64Param ||
        param->second.int64_param() <= 0) {
      return Status::InvalidArgument("parameter 'timeout_us' must be a positive int64 (microseconds)");
    }
    timeout_ns = param->second.int64_param() > kNone / 1000 ? kNone : param->second.int64_param() * 1000;
  }
  // No gRPC deadline reads as a time point centuries away.
  const auto grpc_left = context.deadline() - std::chrono::system_clock::now();
  if (grpc_left < std::chrono::hours(24 * 365)) {
    timeout_ns = std::min<int64_t>(timeout_ns, std::chrono::duration_cast<std::chrono::nanoseconds>(grpc_left).count());
  }
  if (timeout_ns == kNone) return int64_t{0};
  return scheduler.NowNs() + std::max<int64_t>(timeout_ns, 0);
}

// The first block of a call's arena (see Call::arena). Requests of small
// models fit; bigger ones take further blocks.
constexpr size_t kArenaBlockBytes = 8192;

google::protobuf::ArenaOptions ArenaOptionsFor(std::array<char, kArenaBlockBytes>* block) {
  google::protobuf::ArenaOptions options;
  options.initial_block = block->data();
  options.initial_block_size = block->size();
  return options;
}

}  // namespace

// One ModelInfer from its arrival to its answer. It is created before its
// request arrives (gRPC fills it) and holds itself (`self`) while gRPC may
// still use it: until its answer's completion (or a shutdown's refusal) is
// drained by Serve. The handler fills it up to Submit; the scheduler's
// callback (on the lane that ran the request) completes it.
struct InferenceServiceImpl::Call {
  ~Call() { ReleaseSlots(); }
  // The request arrived: it counts in `draining` (the server's in-flight
  // count) until answered, and the completion queue's next event for it is
  // its answer's.
  void Arrived(std::atomic<int64_t>* draining) {
    arrived = true;
    start = std::chrono::steady_clock::now();
    in_flight = draining;
    in_flight->fetch_add(1);
  }
  // What the request held while in flight: the draining count, the
  // tenant's in-flight slot and the host cache pin. Released before the
  // answer is sent, so that a client's next request never finds its
  // previous one still holding them.
  void ReleaseSlots() {
    if (in_flight != nullptr) in_flight->fetch_sub(1);
    in_flight = nullptr;
    ticket = Admission::Ticket();
    pin = HostTier::Pin();
  }

  grpc::ServerContext context;
  // The request lives on the call's arena, whose first block is part of
  // this object: its strings and maps (names, shapes, parameters, a small
  // payload) are carved from it instead of malloc'ed one by one, and freed
  // at once with the call, on the thread that received it. The response is
  // filled by the lane that ran the request (Complete) and freed as soon as
  // Finish has serialized it (Answer: on that lane too unless a ledger
  // writer answers), not with the call: a thread freeing what another
  // allocated takes that thread's glibc arena lock, and the lane and the
  // receiving thread woke each other on it (api/README.md).
  alignas(8) std::array<char, kArenaBlockBytes> arena_block;
  google::protobuf::Arena arena{ArenaOptionsFor(&arena_block)};
  inference::ModelInferRequest& request = *google::protobuf::Arena::CreateMessage<inference::ModelInferRequest>(&arena);
  inference::ModelInferResponse response;
  grpc::ServerAsyncResponseWriter<inference::ModelInferResponse> responder{&context};
  std::shared_ptr<Call> self;  // gRPC's reference: see above
  bool arrived = false;        // see Arrived
  std::atomic<int64_t>* in_flight = nullptr;
  std::chrono::steady_clock::time_point start;
  std::vector<std::string> labels{"", ""};  // tenant, model: "" until known
  int64_t arrival_unix_us = 0;
  int64_t arrival_ns = 0;
  TenantRecord tenant;
  ModelRecord record;
  std::set<std::string> wanted;  // requested outputs; empty = all
  LoadTrace trace;  // for a miss after admission (api/miss_causes.h)
  int64_t load_predicted_ns = 0;  // 0: resident when the request came
  int64_t load_wait_ns = 0;  // measured wait for the weights
  HostTier::Pin pin;
  Admission::Ticket ticket;
  std::string request_id;
  int64_t deadline_ns = 0;
  InferenceRequest scheduled{"", nullptr, {}};  // what Queue submits
  RunReport run;
  Result<std::vector<NamedTensor>> outputs = Status::Internal("not run");
  int64_t answered_ns = 0;  // the scheduler's callback: the lane was done with it
};

void InferenceServiceImpl::RequestNext(grpc::ServerCompletionQueue* cq) {
  auto call = std::make_shared<Call>();
  call->self = call;
  RequestModelInfer(&call->context, &call->request, &call->responder, cq, cq, call.get());
}

void InferenceServiceImpl::Serve(grpc::ServerCompletionQueue* cq) {
  // A few requests asked for ahead, so that a burst is matched at once.
  constexpr int kAhead = 4;
  for (int i = 0; i < kAhead; ++i) RequestNext(cq);
  void* tag = nullptr;
  bool ok = false;
  while (cq->Next(&tag, &ok)) {
    Call* c = static_cast<Call*>(tag);
    if (c->arrived || !ok) {
      // Its answer went out (or the client had gone), or the server is
      // shutting down and refused the slot: gRPC is done with it.
      std::shared_ptr<Call> done = std::move(c->self);
      continue;
    }
    RequestNext(cq);
    std::shared_ptr<Call> call = c->self;
    call->Arrived(&ctx_->in_flight);
    grpc::Status status = Start(call);
    if (!status.ok()) Answer(*call, status);
  }
}

void InferenceServiceImpl::Answer(Call& call, const grpc::Status& status) {
  const int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - call.start).count();
  const std::vector<std::string>& labels = call.labels;
  const std::string_view code = StatusCodeName(static_cast<StatusCode>(status.error_code()));
  // The request and response belong to gRPC once Finish is called: what
  // the request log needs from them is read first, and only when it logs.
  std::string version, request_id;
  const bool log = spdlog::should_log(spdlog::level::debug);
  if (log) {
    version = status.ok() ? call.response.model_version() : call.request.model_version();
    request_id = status.ok() ? call.response.id() : call.request.id();
  }
  call.ReleaseSlots();
  // The answer goes first: metrics and the log are not the client's wait
  // (on a lane they would delay this answer, not the next request's run).
  if (status.ok()) {
    call.responder.Finish(call.response, status, &call);  // serializes it now
    inference::ModelInferResponse().Swap(&call.response);  // freed here (see Call)
  } else {
    call.responder.FinishWithError(status, &call);
  }
  // Structured request log (debug level: `orreryd --log-level debug`).
  if (log) {
    spdlog::debug("infer tenant={} model={} version={} request_id={} code={} latency_us={}", labels[0], labels[1],
                  version, request_id, code, ns / 1000);
  }
  if (ctx_->metrics != nullptr) {
    ctx_->metrics->CountInfer(status.ok(), ns);
    const double seconds = static_cast<double>(ns) / 1e9;
    ctx_->metrics->requests->CounterWith({labels[0], labels[1], std::string(code)}).Increment();
    if (status.ok()) ctx_->metrics->latency->HistogramWith(labels).Observe(seconds);
  }
}

void InferenceServiceImpl::CountMiss(const ModelRecord& record, const LoadTrace& trace, MissHow how) const {
  if (ctx_->host == nullptr) return;
  const MissCause cause = ClassifyMiss(trace, kMissToleranceNs);
  if (ctx_->metrics != nullptr) ctx_->metrics->admitted_misses.Count(trace.at_admission.state, how, cause);
  spdlog::debug("admitted request missed: model={}/{} how={} cause={} state_at_admission={} load_predicted_us={} "
                "found={} room_wait_us={} weights_after_us={}",
                record.tenant_id(), record.name(), MissHowName(how), MissCauseName(cause),
                ResidencyName(trace.at_admission.state), (trace.at_admission.ready_ns - trace.admitted_ns) / 1000,
                ResidencyName(trace.at_acquire), trace.room_wait_ns / 1000,
                (trace.ready_ns - trace.admitted_ns) / 1000);
}

grpc::Status InferenceServiceImpl::Start(const std::shared_ptr<Call>& call) {
  Call& c = *call;
  const inference::ModelInferRequest* request = &c.request;
  c.arrival_unix_us = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  c.arrival_ns = ctx_->scheduler->NowNs();
  if (!ctx_->ready.load()) return ToGrpcStatus(Status::Unavailable("server is draining"));
  TenantRecord& tenant = c.tenant;
  Result<ModelRecord> resolved = Resolve(c.context, request->model_name(), request->model_version(), &tenant);
  c.labels[0] = tenant.id();  // empty when the key was refused
  if (!resolved.ok()) return ToGrpcStatus(resolved.status());
  c.record = std::move(resolved).value();
  const ModelRecord* record = &c.record;
  c.labels[1] = record->name();
  // A missing id is made up only once the request is admitted (below).
  if (!request->id().empty()) {
    if (Status s = CheckRequestId(request->id()); !s.ok()) return ToGrpcStatus(s);
  }

  // Requested outputs must exist; an empty list means all outputs.
  std::set<std::string>& wanted = c.wanted;
  for (const auto& o : request->outputs()) {
    bool known = false;
    for (const auto& spec : record->outputs()) known = known || spec.name() == o.name();
    if (!known) {
      return ToGrpcStatus(Status::InvalidArgument("model '" + record->name() + "' has no output named '" +
                                                  o.name() + "'"));
    }
    wanted.insert(o.name());
  }

  Result<int64_t> deadline = RequestDeadlineNs(c.context, *request, *ctx_->scheduler);
  if (!deadline.ok()) return ToGrpcStatus(deadline.status());
  InferenceRequest& scheduled = c.scheduled;
  scheduled.tenant_id = record->tenant_id();
  scheduled.model_id = ModelCostId(*record);
  LoadCostProfileIfUnknown(*ctx_->catalog, ctx_->scheduler, *record);
  scheduled.deadline_ns = *deadline;
  // Load-aware admission: a version that is not resident is admitted only
  // if it can still meet its deadline after the load's predicted end; it is
  // queued once resident, so it never waits on a lane for its weights.
  int64_t& load_predicted_ns = c.load_predicted_ns;
  LoadTrace& trace = c.trace;
  if (ctx_->host != nullptr) {
    Result<Readiness> ready = ctx_->host->PredictReady(*record);
    if (!ready.ok()) return ToGrpcStatus(ready.status());
    trace.at_admission = *ready;
    trace.admitted_ns = ctx_->host->clock().NowNs();
    load_predicted_ns = std::max<int64_t>(ready->ready_ns - trace.admitted_ns, 0);
    if (load_predicted_ns > 0) scheduled.ready_ns = ctx_->scheduler->NowNs() + load_predicted_ns;
  }
  // A request admission refuses anyway is refused before its payload is
  // decoded and its model pinned, so that a flood of doomed requests costs
  // gRPC, authentication and this check only. Without inputs the check
  // assumes batch 1, the cheapest run: what it refuses, Submit would too.
  // (With a device tier only for a model still to load: Submit may place
  // on the device what the lanes cannot take in time.)
  if (ctx_->device == nullptr || load_predicted_ns > 0) {
    if (Status s = ctx_->scheduler->CheckAdmission(scheduled); !s.ok()) {
      // Rejected with its model still to load: start the load anyway, so
      // that the model's next requests are not all rejected for a load
      // that never happens.
      if (load_predicted_ns > 0 && s.code() == StatusCode::kDeadlineExceeded) {
        Status started = ctx_->host->StartLoad(*record);
        s = Status(s.code(), s.message() + (started.ok() ? "; the load has started, retry shortly"
                                                         : "; the load could not start: " + started.message()));
      }
      return ToGrpcStatus(s);
    }
  }
  scheduled.ready_ns = 0;
  if (ctx_->serving != nullptr && trace.at_admission.state != Residency::kResident) {
    // Acquire waits for the load: on a serving thread, since the threads
    // that receive requests (Serve) receive every other request.
    ctx_->serving->Post([this, call] {
      if (grpc::Status s = Queue(call); !s.ok()) Answer(*call, s);
    });
    return grpc::Status::OK;
  }
  return Queue(call);
}

grpc::Status InferenceServiceImpl::Queue(const std::shared_ptr<Call>& call) {
  Call& c = *call;
  const inference::ModelInferRequest* request = &c.request;
  const ModelRecord* record = &c.record;
  const TenantRecord& tenant = c.tenant;
  InferenceRequest& scheduled = c.scheduled;
  LoadTrace& trace = c.trace;
  Result<std::vector<NamedTensor>> inputs = DecodeInferInputs(*request, ctx_->max_input_bytes);
  if (!inputs.ok()) return ToGrpcStatus(inputs.status());
  scheduled.inputs = std::move(inputs).value();
  scheduled.weight = tenant.weight() == 0 ? 1.0 : static_cast<double>(tenant.weight());
  // The host cache pins the version until the call is answered (the request
  // has then finished on its lane); a miss loads it on a loader thread.
  Result<ModelCache::ModelPtr> model = Status::Internal("unset");
  if (ctx_->host != nullptr) {
    const int64_t acquire_start_ns = ctx_->host->clock().NowNs();
    Result<HostTier::Pin> pinned = ctx_->host->Acquire(*record);
    trace.ready_ns = ctx_->host->clock().NowNs();
    if (!pinned.ok()) {
      CountMiss(*record, trace, MissHow::kAcquireFailed);
      return ToGrpcStatus(pinned.status());
    }
    trace.at_acquire = pinned->state_before();
    trace.room_wait_ns = pinned->room_wait_ns();
    c.load_wait_ns = trace.ready_ns - acquire_start_ns;
    c.pin = std::move(pinned).value();
    model = c.pin.model();
  } else {
    model = ctx_->cache->Get(*record);
  }
  if (!model.ok()) return ToGrpcStatus(model.status());
  // Names, dtypes, shapes and byte counts are checked here, before the
  // request takes a queue slot, not on the lane.
  std::vector<const Tensor*> ordered((*model)->signature().inputs.size());
  if (Status s = runtime::OrderInputs((*model)->signature(), scheduled.inputs, ordered); !s.ok()) {
    return ToGrpcStatus(s.WithPrefix("model '" + record->name() + "'"));
  }
  // Quota admission last, so that a bad request costs no token. The ticket
  // is the tenant's in-flight slot until the call is answered.
  Result<Admission::Ticket> ticket = ctx_->admission->Admit(tenant);
  if (!ticket.ok()) return ToGrpcStatus(ticket.status());
  c.ticket = std::move(ticket).value();
  c.request_id = request->id().empty() ? NewRequestId() : request->id();

  scheduled.model = std::move(model).value();
  if (ctx_->device != nullptr) scheduled.cache_key = HostTier::KeyOf(*record);
  scheduled.report = &c.run;
  c.deadline_ns = scheduled.deadline_ns;
  // The lane that ran the request (or dropped it) encodes its answer,
  // unless lane_answer_queue requests wait for the lanes: a serving thread
  // does then. Either way the ledger writer's thread appends the entry and
  // sends the answer (Complete), so no thread waited for the request and
  // no lane waits for the disk.
  Status submitted = ctx_->scheduler->Submit(std::move(scheduled), [this, call](Result<std::vector<NamedTensor>> out) {
    call->outputs = std::move(out);
    call->answered_ns = ctx_->scheduler->NowNs();
    if (ctx_->serving != nullptr &&
        ((ctx_->ledger == nullptr && ctx_->ledger_fsync_each) ||
         ctx_->scheduler->queue_depth() >= ctx_->lane_answer_queue)) {
      ctx_->serving->Post([this, call] { Complete(call); });
    } else {
      Complete(call);
    }
  });
  if (!submitted.ok()) {
    // Not an early rejection when it waited for (and used) a load first.
    if (submitted.code() == StatusCode::kDeadlineExceeded && trace.waited_for_load()) {
      CountMiss(*record, trace, MissHow::kRejectedLate);
      submitted = submitted.WithPrefix("admitted, then refused after waiting for its model's load");
    }
    return ToGrpcStatus(submitted);
  }
  return grpc::Status::OK;
}

void InferenceServiceImpl::Complete(const std::shared_ptr<Call>& call) {
  Call& c = *call;
  const ModelRecord* record = &c.record;
  const LoadTrace& trace = c.trace;
  const RunReport& run = c.run;
  const int64_t deadline_ns = c.deadline_ns;
  const std::string& request_id = c.request_id;
  const int64_t arrival_unix_us = c.arrival_unix_us;
  const int64_t arrival_ns = c.arrival_ns;
  inference::ModelInferResponse* response = &c.response;
  const int64_t answered_ns = c.answered_ns;
  Result<std::vector<NamedTensor>>& outputs = c.outputs;
  if (!outputs.ok() && outputs.status().code() == StatusCode::kDeadlineExceeded) {
    CountMiss(*record, trace, MissHow::kDropped);
  } else if (outputs.ok() && deadline_ns != 0 && answered_ns > deadline_ns) {
    CountMiss(*record, trace, MissHow::kEndedLate);
  }

  // Metering: the request reached the scheduler, so it gets exactly one
  // ledger entry, written before the client learns the outcome (to the OS,
  // fsynced within --ledger-sync-ms; or fsynced first with 0): the ledger
  // writer answers once it is (Billed).
  // A retry with a request id already in the ledger is not billed again.
  auto wall_us = [&](int64_t sched_ns) { return arrival_unix_us + (sched_ns - arrival_ns) / 1000; };
  LedgerEntry entry;
  entry.set_kind(LedgerEntry::INFERENCE);
  entry.set_tenant_id(record->tenant_id());
  entry.set_model_name(record->name());
  entry.set_model_version(record->version());
  entry.set_request_id(request_id);
  entry.set_arrival_unix_us(arrival_unix_us);
  if (run.started_ns != 0) entry.set_start_unix_us(wall_us(run.started_ns));
  entry.set_end_unix_us(wall_us(run.ended_ns));
  entry.set_queue_us(((run.started_ns != 0 ? run.started_ns : run.ended_ns) - run.admitted_ns) / 1000);
  entry.set_status(std::string(StatusCodeName(outputs.ok() ? StatusCode::kOk : outputs.status().code())));
  // Batched: lane_ns is already this request's share (its rows / the
  // batch's rows) of the batch's lane time, and is what it pays for.
  entry.set_batch_size(static_cast<uint32_t>(std::max(run.batch_size, 1)));
  entry.set_batch_share(run.batch_share);
  entry.set_lane_ns(run.lane_ns);
  // The request that started the host-cache load pays for its bytes; one
  // that hit or joined a load in flight pays nothing for loading. lane_ns is
  // already this request's share of a batch (share 1.0 here).
  entry.set_bytes_loaded(static_cast<uint64_t>(c.pin.bytes_loaded()));
  // On a server with a device tier: where it ran, the device time it held
  // and the host -> device transfer its placement started (the request
  // whose placement starts a transfer pays for it, as for a host load).
  if (ctx_->device != nullptr) {
    entry.set_placement(run.on_device ? "device" : "cpu");
    entry.set_device_ns(run.device_ns);
    entry.set_bytes_transferred(static_cast<uint64_t>(run.bytes_transferred));
  }
  entry.set_cost_micros(InferenceCostMicros(ctx_->prices, run.lane_ns, 1.0, entry.bytes_loaded()) +
                        DeviceCostMicros(ctx_->prices, run.device_ns, entry.bytes_transferred()));
  // An id this server made up is in no ledger entry yet: no lookup for it.
  const LedgerAppendOptions append{.new_request_id = c.request.id().empty()};

  // The response is encoded here (off the writer's thread, which answers
  // every request in turn); it is sent only once the entry is written.
  if (outputs.ok()) {
    if (!c.wanted.empty()) {
      std::erase_if(*outputs, [&](const NamedTensor& t) { return !c.wanted.count(t.name); });
    }
    response->set_model_name(record->name());
    response->set_model_version(std::to_string(record->version()));
    response->set_id(request_id);
    EncodeInferOutputs(*outputs, response);
    // Freed here, on the thread that allocated them (the lane that ran the
    // request), not with the call on a receiving thread (see Call).
    std::vector<NamedTensor>().swap(*outputs);
    // What the scheduler measured, so that a client (bench/loadgen) can split
    // its end-to-end latency into queueing, execution and serving overhead.
    (*response->mutable_parameters())["orrery_lane_ns"].set_int64_param(run.lane_ns);
    (*response->mutable_parameters())["orrery_predicted_lane_ns"].set_int64_param(run.predicted_lane_ns);
    (*response->mutable_parameters())["orrery_queue_ns"].set_int64_param(
        (run.started_ns != 0 ? run.started_ns : run.ended_ns) - run.admitted_ns);
    // The arrival itself on the scheduler's clock (steady_clock in orreryd): a
    // client on the same host splits gRPC and the network into the request's
    // way in (its send to here) and the answer's way out.
    (*response->mutable_parameters())["orrery_arrival_steady_ns"].set_int64_param(arrival_ns);
    if (ctx_->device != nullptr) {
      (*response->mutable_parameters())["orrery_placement"].set_string_param(run.on_device ? "device" : "cpu");
      (*response->mutable_parameters())["orrery_device_ns"].set_int64_param(run.device_ns);
    }
    // The host cache: how long this request waited for the model's weights
    // (a load, or joining one) and what was predicted (0 when resident).
    (*response->mutable_parameters())["orrery_load_wait_ns"].set_int64_param(c.load_wait_ns);
    (*response->mutable_parameters())["orrery_load_predicted_ns"].set_int64_param(c.load_predicted_ns);
  }
  if (ctx_->ledger == nullptr) {  // no writer (tests of the API alone): appended here
    Result<bool> billed = ctx_->catalog->AppendLedger(&entry, append);
    Answer(c, Billed(c, billed));
    return;
  }
  ctx_->ledger->Append(std::move(entry), append,
                       [this, call](Result<bool> billed) { Answer(*call, Billed(*call, billed)); });
}

grpc::Status InferenceServiceImpl::Billed(Call& c, const Result<bool>& billed) {
  if (!billed.ok()) {
    return ToGrpcStatus(
        billed.status().WithPrefix("request " + c.request_id + " ran but its ledger entry was not written"));
  }
  if (!c.outputs.ok()) return ToGrpcStatus(c.outputs.status());
  // Handler arrival to here (the ledger write included): the client's
  // latency minus this is gRPC and the network.
  const int64_t now_ns = ctx_->scheduler->NowNs();
  (*c.response.mutable_parameters())["orrery_server_ns"].set_int64_param(now_ns - c.arrival_ns);
  // What this request needed after its lane (wake-up, encoding, the wait
  // for the ledger writer and its write): admission plans for it.
  ctx_->scheduler->ObserveResponseNs(now_ns - c.answered_ns);
  return grpc::Status::OK;
}

}  // namespace orrery
