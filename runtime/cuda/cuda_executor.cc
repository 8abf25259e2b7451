#include "runtime/cuda/cuda_executor.h"

#include <algorithm>
#include <cstdio>

namespace orrery::runtime {

CudaExecutor::CudaExecutor(CudaContext* context, size_t max_plans)
    : context_(context), max_plans_(max_plans == 0 ? 1 : max_plans) {}

Status CudaExecutor::Arrange(const CompiledModel& model, const std::vector<NamedTensor>& inputs,
                             std::vector<Tensor>* ordered, std::vector<ops::TensorType>* types,
                             std::string* key) const {
  const ModelSignature& sig = model.signature();
  *key = PlanId(model);
  for (const TensorSpec& spec : sig.inputs) {
    const NamedTensor* found = nullptr;
    for (const NamedTensor& in : inputs) {
      if (in.name == spec.name) found = &in;
    }
    if (found == nullptr) return Status::InvalidArgument("input '" + spec.name + "' is missing");
    if (found->tensor.dtype() != spec.dtype) {
      return Status::InvalidArgument("input '" + spec.name + "' has the wrong dtype");
    }
    ordered->push_back(found->tensor);
    types->push_back(ops::TensorType{found->tensor.dtype(), found->tensor.shape()});
    key->append("|").append(std::to_string(static_cast<int>(found->tensor.dtype())));
    for (int64_t d : found->tensor.shape()) key->append(",").append(std::to_string(d));
  }
  return Status::Ok();
}

std::string CudaExecutor::PlanId(const CompiledModel& model) {
  char plan_id[32];
  std::snprintf(plan_id, sizeof(plan_id), "%p", static_cast<const void*>(model.shape_generic_plan().get()));
  return plan_id;
}

Result<std::shared_ptr<const CudaWeights>> CudaExecutor::WeightsFor(const std::string& id,
                                                                    const CompiledModel& model,
                                                                    std::span<const uint32_t> pages, bool* uploaded) {
  *uploaded = false;
  std::shared_ptr<const Plan> plan = model.shape_generic_plan();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = weights_.find(id);
    if (it != weights_.end() && &it->second->plan() == plan.get() &&
        (pages.empty() || std::ranges::equal(it->second->pages(), pages))) {
      return it->second;
    }
  }
  // Outside the lock (it blocks for the copies): two uploads of one model
  // at once may both run (onto the same pages: the same bytes), the second
  // result is kept.
  ORRERY_ASSIGN_OR_RETURN(std::shared_ptr<const CudaWeights> weights, CudaWeights::Upload(plan, context_, pages));
  std::lock_guard<std::mutex> lock(mu_);
  weights_.insert_or_assign(id, weights);
  *uploaded = true;
  return weights;
}

Status CudaExecutor::Upload(const std::string& model_id, const CompiledModel& model,
                            std::span<const uint32_t> pages) {
  if (context_ == nullptr) return Status::Unavailable("no CUDA device");
  const std::string id = model_id.empty() ? PlanId(model) : model_id;
  bool uploaded = false;
  ORRERY_RETURN_IF_ERROR(WeightsFor(id, model, pages, &uploaded).status());
  std::lock_guard<std::mutex> lock(mu_);
  weight_stats_.uploads += uploaded;
  return Status::Ok();
}

void CudaExecutor::Release(const std::string& model_id) {
  // Destroyed after the lock is released: freeing device memory synchronises.
  std::shared_ptr<const CudaWeights> weights;
  std::vector<std::shared_ptr<Entry>> plans;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = weights_.find(model_id);
  if (it == weights_.end()) return;
  weights = std::move(it->second);
  weights_.erase(it);
  ++weight_stats_.releases;
  for (auto p = plans_.begin(); p != plans_.end();) {
    if (p->second->weights_id != model_id) {
      ++p;
      continue;
    }
    lru_.erase(p->second->lru);
    plans.push_back(std::move(p->second));
    p = plans_.erase(p);
  }
}

CudaExecutor::WeightStats CudaExecutor::weight_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  WeightStats s = weight_stats_;
  s.resident = weights_.size();
  for (const auto& [id, w] : weights_) s.resident_bytes += w->device_bytes();
  return s;
}

Status CudaExecutor::Supports(const CompiledModel& model, const std::vector<NamedTensor>& inputs) {
  std::vector<Tensor> ordered;
  std::vector<ops::TensorType> types;
  std::string key;
  ORRERY_RETURN_IF_ERROR(Arrange(model, inputs, &ordered, &types, &key));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = support_.find(key);
  if (it != support_.end()) return it->second.status;
  // The plan's address is in the key: the answer keeps the plan alive, so
  // no other plan can take its address while it is remembered.
  if (support_.size() >= 4096) support_.clear();
  std::shared_ptr<const Plan> plan = model.shape_generic_plan();
  Status st = CheckCudaPlan(*plan, types);
  support_.emplace(key, Support{std::move(plan), st});
  return st;
}

Result<std::vector<NamedTensor>> CudaExecutor::Run(const std::string& model_id, const CompiledModel& model,
                                                   const std::vector<NamedTensor>& inputs) {
  if (context_ == nullptr) return Status::Unavailable("no CUDA device");
  std::vector<Tensor> ordered;
  std::vector<ops::TensorType> types;
  std::string key;
  ORRERY_RETURN_IF_ERROR(Arrange(model, inputs, &ordered, &types, &key));
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) {
      entry = it->second;
      lru_.splice(lru_.begin(), lru_, entry->lru);
    }
  }
  if (entry == nullptr) {
    // Compiled outside the lock (it allocates, and may upload the weights);
    // two first runs of one model may both compile, the second result is kept.
    auto fresh = std::make_shared<Entry>();
    fresh->plan = model.shape_generic_plan();
    fresh->weights_id = model_id.empty() ? PlanId(model) : model_id;
    bool uploaded = false;
    ORRERY_ASSIGN_OR_RETURN(std::shared_ptr<const CudaWeights> weights,
                            WeightsFor(fresh->weights_id, model, {}, &uploaded));
    if (uploaded) {
      std::lock_guard<std::mutex> lock(mu_);
      ++weight_stats_.fallback_uploads;
    }
    ORRERY_ASSIGN_OR_RETURN(fresh->cuda, CudaPlan::Compile(fresh->plan, types, context_, std::move(weights)));
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) {
      lru_.erase(it->second->lru);
      plans_.erase(it);
    }
    lru_.push_front(key);
    fresh->lru = lru_.begin();
    plans_.emplace(key, fresh);
    entry = fresh;
    while (plans_.size() > max_plans_) {
      plans_.erase(lru_.back());  // a run holding it keeps it alive until it ends
      lru_.pop_back();
    }
  }
  ORRERY_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, entry->cuda->Run(ordered));
  const ModelSignature& sig = model.signature();
  if (outputs.size() != sig.outputs.size()) {
    return Status::Internal("the GPU plan returned " + std::to_string(outputs.size()) + " outputs, the model has " +
                            std::to_string(sig.outputs.size()));
  }
  std::vector<NamedTensor> named;
  named.reserve(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) named.push_back(NamedTensor{sig.outputs[i].name, std::move(outputs[i])});
  return named;
}

size_t CudaExecutor::compiled_plans() const {
  std::lock_guard<std::mutex> lock(mu_);
  return plans_.size();
}

}  // namespace orrery::runtime
