// Cost functions (FLOPs, bytes moved) for profiles and scheduling. They are
// attached after every kernel is registered (OpRegistry::SetCost), so kernel
// files need no change to be costed; a kernel that sets KernelDef::cost
// itself keeps its own. Kernels without one get BytesMovedCost.
#include <cstdint>
#include <limits>

#include "ops/registry.h"

namespace orrery::ops {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// Hostile shapes can make FLOP counts overflow int64: saturate.
int64_t SatMul(int64_t a, int64_t b) {
  if (a <= 0 || b <= 0) return 0;
  return a > kMax / b ? kMax : a * b;
}

int64_t SatAdd(int64_t a, int64_t b) { return b > kMax - a ? kMax : a + b; }

// Shapes reaching a cost function passed inference, so dims are >= 0.
int64_t Elements(const TensorType& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n = SatMul(n, d);
  return n;
}

bool HasInput(const CostContext& ctx, size_t i) {
  return i < ctx.inputs.size() && ctx.inputs[i].present();
}

// Y[M, N] = A * B (+ C): 2*M*N*K, K taken from A's size (whatever transA).
OpCost GemmCost(const CostContext& ctx) {
  OpCost c = BytesMovedCost(ctx);
  if (ctx.outputs.empty() || ctx.outputs[0].shape.size() != 2 || !HasInput(ctx, 0)) return c;
  const int64_t m = ctx.outputs[0].shape[0];
  const int64_t y = Elements(ctx.outputs[0]);
  const int64_t k = m > 0 ? Elements(ctx.inputs[0]) / m : 0;
  c.flops = SatMul(SatMul(2, y), k);
  if (HasInput(ctx, 2)) c.flops = SatAdd(c.flops, y);
  return c;
}

// Y[..., M, N] = A[..., M, K] * B[..., K, N]: 2 * |Y| * K.
OpCost MatMulCost(const CostContext& ctx) {
  OpCost c = BytesMovedCost(ctx);
  if (ctx.outputs.empty() || !HasInput(ctx, 0) || ctx.inputs[0].shape.empty()) return c;
  c.flops = SatMul(SatMul(2, Elements(ctx.outputs[0])), ctx.inputs[0].shape.back());
  return c;
}

// Y[N, M, out...] with W[M, C/group, k...]: 2 * |Y| * |W| / M (+ |Y| for bias).
OpCost ConvCost(const CostContext& ctx) {
  OpCost c = BytesMovedCost(ctx);
  if (ctx.outputs.empty() || !HasInput(ctx, 1) || ctx.inputs[1].shape.empty()) return c;
  const int64_t m = ctx.inputs[1].shape[0];
  const int64_t per_output = m > 0 ? Elements(ctx.inputs[1]) / m : 0;
  const int64_t y = Elements(ctx.outputs[0]);
  c.flops = SatMul(SatMul(2, y), per_output);
  if (HasInput(ctx, 2)) c.flops = SatAdd(c.flops, y);
  return c;
}

// One operation per output element.
OpCost ElementwiseCost(const CostContext& ctx) {
  OpCost c = BytesMovedCost(ctx);
  for (const TensorType& t : ctx.outputs) {
    if (t.present()) c.flops = SatAdd(c.flops, Elements(t));
  }
  return c;
}

constexpr const char* kElementwiseOps[] = {
    "Add",  "Sub",     "Mul",       "Div",     "Pow",         "Max",         "Min",
    "Sum",  "Mean",    "Relu",      "LeakyRelu", "PRelu",     "Sigmoid",     "HardSigmoid",
    "Tanh", "Exp",     "Log",       "Sqrt",    "Reciprocal",  "Neg",         "Abs",
    "Erf",  "Clip",    "Elu",       "Selu",    "Softplus",    "HardSwish",   "Gelu",
    "Sin",  "Cos",     "Floor",     "Ceil",    "Round",       "Sign",        "Where",
};

}  // namespace

Status RegisterCpuCosts(OpRegistry* registry) {
  struct Entry {
    const char* op;
    CostFn fn;
  };
  const Entry kCosts[] = {{"Gemm", GemmCost}, {"MatMul", MatMulCost}, {"Conv", ConvCost}};
  for (const Entry& e : kCosts) {
    if (registry->Find(e.op, Backend::kCpu) != nullptr) {
      ORRERY_RETURN_IF_ERROR(registry->SetCost(e.op, Backend::kCpu, e.fn));
    }
  }
  for (const char* op : kElementwiseOps) {
    if (registry->Find(op, Backend::kCpu) != nullptr) {
      ORRERY_RETURN_IF_ERROR(registry->SetCost(op, Backend::kCpu, ElementwiseCost));
    }
  }
  return Status::Ok();
}

}  // namespace orrery::ops
