// Sends a workload over gRPC without waiting for responses: one sender thread
// follows the arrival schedule (sleeping until each intended time), async
// calls complete on a CompletionQueue drained by a few threads, which also
// keep closed-loop streams topped up. A slow server therefore delays nothing
// but its own responses (open loop), and latency counts from the intended
// send time.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "api/proto/grpc_predict_v2.grpc.pb.h"
#include "bench/loadgen/report.h"
#include "bench/loadgen/workload.h"

namespace orrery::loadgen {

struct Target {
  inference::GRPCInferenceService::Stub* stub = nullptr;  // setup calls (cold starts)
  // The calls of the run go through a generic stub on this channel, with
  // `request` serialized once: a call shares its bytes instead of
  // serializing 32+ KiB again (the client shares CPU 0 with orreryd's
  // front end in the scenarios, so its cost per request is theirs too).
  std::shared_ptr<grpc::Channel> channel;
  std::string api_key;  // "" sends no authorization metadata (echo server)
  inference::ModelInferRequest request;
  int64_t deadline_us = 0;  // also set as request parameter timeout_us by the caller
  int closed = 0;           // > 0: closed loop with this many outstanding
};

struct RunOptions {
  int64_t warmup_ns = 0;    // arrivals before this are sent but not recorded
  int64_t duration_ns = 0;  // measured window after the warm-up
  int completion_threads = 2;
  // Called once at the end of the warm-up (e.g. to snapshot server stats);
  // runs on its own thread, so it delays no arrival.
  std::function<void()> on_warmup_end;
  // Called once at the end of the measured window, when sending stops and
  // before the outstanding calls drain (same thread as on_warmup_end): the
  // last moment closed-loop streams are all still backlogged.
  std::function<void()> on_window_end;
};

// Runs `arrivals` (times relative to the start; the caller includes the
// warm-up in them) and the closed-loop targets for warmup + duration, then
// waits for every outstanding call. Blocks for about that long. Records of
// calls sent in the measured window are returned, sent_ns relative to the
// window's start.
std::vector<Record> RunWorkload(const std::vector<Target>& targets, const std::vector<Arrival>& arrivals,
                                const RunOptions& options);

}  // namespace orrery::loadgen
