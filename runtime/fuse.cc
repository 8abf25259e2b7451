#include "runtime/fuse.h"

#include <cmath>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace orrery::runtime {
namespace {

constexpr std::string_view kActivations[] = {"Relu",        "LeakyRelu", "Clip",   "HardSigmoid",
                                             "HardSwish",   "Sigmoid",   "Tanh"};

bool IsAnchor(const Step& s) {
  return s.op_type == "Conv" || s.op_type == "Gemm" || s.op_type == "MatMul";
}

bool IsActivation(const Step& s) {
  for (std::string_view a : kActivations) {
    if (s.op_type == a) return true;
  }
  return false;
}

// What a fused anchor has absorbed so far; fusions apply in this order.
enum class Stage { kNone = 0, kBias = 1, kResidual = 2, kActivation = 3 };

Stage StageOf(const Step& s) {
  if (s.attrs.Has("_fused_activation")) return Stage::kActivation;
  if (s.attrs.Has("_fused_residual")) return Stage::kResidual;
  if (s.attrs.Has("_fused_bias")) return Stage::kBias;
  return Stage::kNone;
}

class Fuser {
 public:
  explicit Fuser(Plan* plan) : plan_(plan) {}

  Result<FusionStats> Run() {
    constant_.assign(plan_->num_slots, -1);
    for (size_t c = 0; c < plan_->constants.size(); ++c) {
      constant_[static_cast<size_t>(plan_->constants[c].first)] = static_cast<int>(c);
    }
    is_output_.assign(plan_->num_slots, false);
    for (int id : plan_->output_slots) is_output_[static_cast<size_t>(id)] = true;
    readers_.assign(plan_->num_slots, 0);
    sole_reader_.assign(plan_->num_slots, -1);
    for (size_t s = 0; s < plan_->steps.size(); ++s) {
      for (int id : plan_->steps[s].inputs) {
        if (id < 0) continue;
        ++readers_[static_cast<size_t>(id)];
        sole_reader_[static_cast<size_t>(id)] = static_cast<int>(s);
      }
    }
    steps_.reserve(plan_->steps.size());
    for (Step& s : plan_->steps) steps_.emplace_back(std::move(s));

    for (size_t i = 0; i < steps_.size(); ++i) {
      if (!steps_[i].has_value() || !IsAnchor(*steps_[i])) continue;
      ORRERY_RETURN_IF_ERROR(FuseFrom(i));
    }

    plan_->steps.clear();
    for (std::optional<Step>& s : steps_) {
      if (s.has_value()) plan_->steps.push_back(std::move(*s));
    }
    return stats_;
  }

 private:
  const Tensor* Constant(int slot) const {
    if (slot < 0 || constant_[static_cast<size_t>(slot)] < 0) return nullptr;
    return &plan_->constants[static_cast<size_t>(constant_[static_cast<size_t>(slot)])].second;
  }

  // The step that alone reads `slot`, if any (and `slot` is no graph output).
  std::optional<size_t> SoleReader(int slot) const {
    if (slot < 0 || is_output_[static_cast<size_t>(slot)] ||
        readers_[static_cast<size_t>(slot)] != 1) {
      return std::nullopt;
    }
    const int r = sole_reader_[static_cast<size_t>(slot)];
    if (r < 0 || !steps_[static_cast<size_t>(r)].has_value()) return std::nullopt;
    return static_cast<size_t>(r);
  }

  int AddConstant(Tensor t, const std::string& name) {
    const int slot = static_cast<int>(plan_->num_slots++);
    plan_->slot_names.push_back(name);
    constant_.push_back(static_cast<int>(plan_->constants.size()));
    plan_->constants.emplace_back(slot, std::move(t));
    is_output_.push_back(false);
    readers_.push_back(1);
    sole_reader_.push_back(-1);
    return slot;
  }

  Status FuseFrom(size_t anchor) {
    for (;;) {
      Step& a = *steps_[anchor];
      if (a.outputs.size() != 1) return Status::Ok();
      const std::optional<size_t> next = SoleReader(a.outputs[0]);
      if (!next.has_value()) return Status::Ok();
      Step& s = *steps_[*next];
      const Stage stage = StageOf(a);
      bool absorbed = false;
      if (stage == Stage::kNone && a.op_type == "Conv" && s.op_type == "BatchNormalization") {
        ORRERY_ASSIGN_OR_RETURN(absorbed, FoldBatchNorm(a, s));
        if (absorbed) ++stats_.batchnorms_folded;
      } else if (stage < Stage::kBias && a.op_type == "MatMul" && s.op_type == "Add" &&
                 (a.fusions & ops::kFuseBias) != 0) {
        absorbed = FuseBias(a, s);
        if (absorbed) ++stats_.biases;
      }
      if (!absorbed && stage < Stage::kResidual && s.op_type == "Add" &&
          (a.fusions & ops::kFuseResidual) != 0) {
        absorbed = FuseResidual(a, s);
        if (absorbed) ++stats_.residuals;
      }
      if (!absorbed && stage < Stage::kActivation && IsActivation(s) &&
          (a.fusions & ops::kFuseActivation) != 0) {
        absorbed = FuseActivation(a, s);
        if (absorbed) ++stats_.activations;
      }
      if (!absorbed) return Status::Ok();
      // The fused step takes the absorbed step's place: every value it now
      // reads (a residual, say) is computed by then, and the anchor's own
      // inputs were computed before the anchor.
      a.outputs = s.outputs;
      a.label += " + " + s.op_type;
      steps_[*next] = std::move(a);
      steps_[anchor].reset();
      anchor = *next;
    }
  }

  // Conv(X, W, B) -> BatchNormalization(scale, bias, mean, var), all
  // constant: W'[m] = W[m] * s[m], B'[m] = (B[m] - mean[m]) * s[m] + bias[m]
  // with s = scale / sqrt(var + epsilon).
  Result<bool> FoldBatchNorm(Step& conv, const Step& bn) {
    for (size_t o = 1; o < bn.outputs.size(); ++o) {
      if (bn.outputs[o] >= 0) return false;  // training-mode statistics requested
    }
    if (bn.inputs.size() != 5 || bn.inputs[0] != conv.outputs[0]) return false;
    ORRERY_ASSIGN_OR_RETURN(int64_t training, bn.attrs.GetInt("training_mode", 0));
    if (training != 0) return false;
    ORRERY_ASSIGN_OR_RETURN(float eps, bn.attrs.GetFloat("epsilon", 1e-5f));
    const Tensor* w = Constant(conv.inputs[1]);
    const Tensor* b = conv.inputs.size() > 2 ? Constant(conv.inputs[2]) : nullptr;
    const bool has_b = conv.inputs.size() > 2 && conv.inputs[2] >= 0;
    if (w == nullptr || w->dtype() != DType::kFloat32 || w->shape().size() < 3 ||
        (has_b && b == nullptr)) {
      return false;
    }
    const int64_t m = w->shape()[0];
    const Tensor* p[4];
    for (size_t i = 0; i < 4; ++i) {
      p[i] = Constant(bn.inputs[i + 1]);
      if (p[i] == nullptr || p[i]->dtype() != DType::kFloat32 || p[i]->shape() != Shape{m}) {
        return false;
      }
    }
    if (b != nullptr && (b->dtype() != DType::kFloat32 || b->shape() != Shape{m})) return false;
    const float* scale = p[0]->data<float>();
    const float* shift = p[1]->data<float>();
    const float* mean = p[2]->data<float>();
    const float* var = p[3]->data<float>();
    ORRERY_ASSIGN_OR_RETURN(Tensor w2, Tensor::Allocate(DType::kFloat32, w->shape()));
    ORRERY_ASSIGN_OR_RETURN(Tensor b2, Tensor::Allocate(DType::kFloat32, {m}));
    const int64_t per = m == 0 ? 0 : w->num_elements() / m;
    for (int64_t o = 0; o < m; ++o) {
      const float s = scale[o] / std::sqrt(var[o] + eps);
      const float* src = w->data<float>() + o * per;
      float* dst = w2.data<float>() + o * per;
      for (int64_t i = 0; i < per; ++i) dst[i] = src[i] * s;
      const float bias = b != nullptr ? b->data<float>()[o] : 0.0f;
      b2.data<float>()[o] = (bias - mean[o]) * s + shift[o];
    }
    const std::string& base = plan_->slot_names[static_cast<size_t>(conv.outputs[0])];
    conv.inputs.resize(3);
    conv.inputs[1] = AddConstant(std::move(w2), base + "/bn_folded_W");
    conv.inputs[2] = AddConstant(std::move(b2), base + "/bn_folded_B");
    return true;
  }

  // The Add's operand other than `slot` (-1 unless it is a binary Add of
  // `slot` with something else).
  static int OtherOperand(const Step& add, int slot) {
    if (add.inputs.size() != 2 || add.outputs.size() != 1) return -1;
    if (add.inputs[0] == slot && add.inputs[1] != slot) return add.inputs[1];
    if (add.inputs[1] == slot && add.inputs[0] != slot) return add.inputs[0];
    return -1;
  }

  // MatMul(A, W) with constant W [K, N], then Add of a constant [N]: the
  // output's last dim is N, so the bias never changes the shape.
  bool FuseBias(Step& mm, const Step& add) {
    const int other = OtherOperand(add, mm.outputs[0]);
    const Tensor* w = mm.inputs.size() == 2 ? Constant(mm.inputs[1]) : nullptr;
    const Tensor* bias = Constant(other);
    if (w == nullptr || bias == nullptr || w->shape().size() != 2 ||
        w->dtype() != DType::kFloat32 || bias->dtype() != DType::kFloat32 ||
        bias->shape() != Shape{w->shape()[1]}) {
      return false;
    }
    mm.inputs.push_back(other);
    mm.attrs.Set("_fused_bias", int64_t{1});
    return true;
  }

  // Anchor, then Add(anchor, Z): exact only when Z has the anchor's output
  // shape, so the original steps stay as the fallback.
  bool FuseResidual(Step& a, const Step& add) {
    const int z = OtherOperand(add, a.outputs[0]);
    if (z < 0) return false;
    Step original = a;  // before this fusion (bias already in)
    a.unfused.clear();
    a.unfused.push_back(std::move(original));
    a.unfused.back().unfused.clear();
    a.unfused.push_back(add);
    if (a.op_type == "Conv" && a.inputs.size() < 3) a.inputs.resize(3, -1);  // absent B
    if (a.op_type == "Gemm" && a.inputs.size() < 3) a.inputs.resize(3, -1);  // absent C
    if (a.op_type == "MatMul" && a.inputs.size() < 3) a.inputs.resize(3, -1);  // absent bias
    a.inputs.push_back(z);
    a.attrs.Set("_fused_residual", int64_t{1});
    return true;
  }

  bool FuseActivation(Step& a, const Step& act) {
    if (act.outputs.size() != 1 || act.inputs.empty() || act.inputs[0] != a.outputs[0]) {
      return false;
    }
    float alpha = 0, beta = 0;
    if (act.op_type == "LeakyRelu") {
      Result<float> r = act.attrs.GetFloat("alpha", 0.01f);
      if (!r.ok()) return false;
      alpha = *r;
    } else if (act.op_type == "HardSigmoid") {
      Result<float> ra = act.attrs.GetFloat("alpha", 0.2f);
      Result<float> rb = act.attrs.GetFloat("beta", 0.5f);
      if (!ra.ok() || !rb.ok()) return false;
      alpha = *ra;
      beta = *rb;
    } else if (act.op_type == "Clip") {
      if (!ClipBounds(act, &alpha, &beta)) return false;
    } else if (act.inputs.size() != 1) {
      return false;
    }
    if (!a.unfused.empty()) a.unfused.push_back(act);
    a.attrs.Set("_fused_activation", act.op_type);
    a.attrs.Set("_fused_alpha", alpha);
    a.attrs.Set("_fused_beta", beta);
    return true;
  }

  // Clip's bounds: attributes before opset 11, optional constant inputs after.
  bool ClipBounds(const Step& clip, float* lo, float* hi) const {
    *lo = -INFINITY;
    *hi = INFINITY;
    if (plan_->opset < 11) {
      Result<float> rmin = clip.attrs.GetFloat("min", -INFINITY);
      Result<float> rmax = clip.attrs.GetFloat("max", INFINITY);
      if (!rmin.ok() || !rmax.ok()) return false;
      *lo = *rmin;
      *hi = *rmax;
      return true;
    }
    for (size_t i = 1; i < clip.inputs.size() && i < 3; ++i) {
      if (clip.inputs[i] < 0) continue;
      const Tensor* t = Constant(clip.inputs[i]);
      if (t == nullptr || t->dtype() != DType::kFloat32 || t->num_elements() != 1) return false;
      (i == 1 ? *lo : *hi) = t->data<float>()[0];
    }
    return true;
  }

  Plan* plan_;
  std::vector<std::optional<Step>> steps_;
  std::vector<int> constant_;  // slot -> index into plan_->constants, -1 if none
  std::vector<bool> is_output_;
  std::vector<int> readers_;      // steps reading each slot
  std::vector<int> sole_reader_;  // the last of them (the only one when readers_ == 1)
  FusionStats stats_;
};

}  // namespace

Result<FusionStats> FusePlan(Plan* plan) { return Fuser(plan).Run(); }

}  // namespace orrery::runtime
