#include "scheduler/calibration.h"

#include <algorithm>
#include <utility>

#include "scheduler/scheduler.h"

namespace orrery {

std::vector<int> CalibrationBatchSizes(const ModelSignature& signature, int max_batch) {
  int64_t fixed = 0;
  bool dynamic = !signature.inputs.empty();
  for (const TensorSpec& in : signature.inputs) {
    if (!in.rank_known || in.shape.empty()) return {1};
    if (in.shape[0] < 0) continue;
    dynamic = false;
    if (fixed != 0 && fixed != in.shape[0]) return {1};  // no common batch dim
    fixed = in.shape[0];
  }
  if (fixed > 0) return {static_cast<int>(std::min<int64_t>(fixed, 1 << 20))};
  if (!dynamic) return {1};
  std::vector<int> sizes;
  for (int b = 1; b <= std::min(std::max(max_batch, 1), 8); b *= 2) sizes.push_back(b);
  return sizes;
}

Result<std::vector<NamedTensor>> CalibrationInputs(const ModelSignature& signature, int batch) {
  std::vector<NamedTensor> out;
  out.reserve(signature.inputs.size());
  for (const TensorSpec& in : signature.inputs) {
    Shape shape = in.shape;
    if (!in.rank_known) {
      if (batch > 1) return Status::InvalidArgument("input '" + in.name + "' has no declared rank to batch");
      shape = {};
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      if (d == 0 && shape[0] < 0) {
        shape[0] = batch;
      } else if (shape[d] < 0) {
        shape[d] = 1;
      }
    }
    ORRERY_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(in.dtype, std::move(shape)));
    out.push_back({in.name, std::move(t)});
  }
  return out;
}

namespace {

constexpr int kRunsPerBatch = 2;

struct CalibrationState {
  FairScheduler* scheduler;
  std::string tenant_id;
  ModelCache::ModelPtr model;
  std::vector<int> batches;
  size_t next = 0;  // index into runs: batch = batches[next / kRunsPerBatch]
  CostProfile profile;
  BatchProfile best;  // of the current batch size
  RunReport report;
  std::function<void(CostProfile)> done;
};

Status SubmitNext(const std::shared_ptr<CalibrationState>& st);

void OnRun(const std::shared_ptr<CalibrationState>& st, const Result<std::vector<NamedTensor>>& outputs) {
  const int batch = st->batches[st->next / kRunsPerBatch];
  st->profile.lane_ns += st->report.lane_ns;
  ++st->profile.runs;
  if (outputs.ok() && (st->best.total_ns == 0 || st->report.lane_ns < st->best.total_ns)) {
    st->best = BatchProfile{batch, st->report.lane_ns, std::move(st->report.step_ns)};
  }
  ++st->next;
  if (st->next % kRunsPerBatch == 0) {
    if (st->best.total_ns > 0) st->profile.batches.push_back(std::move(st->best));
    st->best = {};
    // A batch size that fails (e.g. out of memory) makes larger ones pointless.
    if (!outputs.ok()) st->next = st->batches.size() * kRunsPerBatch;
  }
  if (st->next < st->batches.size() * kRunsPerBatch && SubmitNext(st).ok()) return;
  std::function<void(CostProfile)> done = std::move(st->done);
  done(std::move(st->profile));
}

Status SubmitNext(const std::shared_ptr<CalibrationState>& st) {
  const int batch = st->batches[st->next / kRunsPerBatch];
  ORRERY_ASSIGN_OR_RETURN(std::vector<NamedTensor> inputs, CalibrationInputs(st->model->signature(), batch));
  InferenceRequest request{st->tenant_id, st->model, std::move(inputs)};
  request.model_id = st->profile.model_id;
  request.calibration = true;
  st->report = {};
  request.report = &st->report;
  return st->scheduler->Submit(std::move(request),
                               [st](Result<std::vector<NamedTensor>> outputs) { OnRun(st, outputs); });
}

}  // namespace

Status StartCalibration(FairScheduler* scheduler, const std::string& tenant_id, ModelCache::ModelPtr model,
                        const std::string& model_id, std::vector<int> batches,
                        std::function<void(CostProfile)> done) {
  if (batches.empty()) return Status::InvalidArgument("no batch sizes to calibrate");
  auto st = std::make_shared<CalibrationState>();
  st->scheduler = scheduler;
  st->tenant_id = tenant_id;
  st->model = std::move(model);
  st->batches = std::move(batches);
  st->profile.model_id = model_id;
  st->done = std::move(done);
  return SubmitNext(st);
}

}  // namespace orrery
