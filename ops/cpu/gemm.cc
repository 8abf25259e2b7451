// Gemm: Y = alpha * op(A) * op(B) + beta * C, C unidirectionally broadcast,
// plus the runtime's fused forms (ops/cpu/gemm/fusion.h): an activation and a
// residual Z [M, N] (the last input), Y = act(alpha A B + beta C + Z).
// Prepare packs constant operands once per node (NodeCache) and classifies
// C: a [N] / [1, N] or [M, 1] bias becomes the GEMM epilogue's column / row
// bias; other shapes are written into Y first and accumulated onto.
#include <memory>
#include <string>
#include <vector>

#include "ops/broadcast.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/gemm/fusion.h"
#include "ops/cpu/gemm/sgemm.h"
#include "ops/cpu/packed_state.h"
#include "ops/kernel_util.h"

namespace orrery::ops::cpu {
namespace {

struct GemmParams {
  float alpha = 1.0f;
  float beta = 1.0f;
  bool trans_a = false;
  bool trans_b = false;
};

Result<GemmParams> ReadParams(const Attributes& attrs) {
  GemmParams p;
  ORRERY_ASSIGN_OR_RETURN(p.alpha, attrs.GetFloat("alpha", 1.0f));
  ORRERY_ASSIGN_OR_RETURN(p.beta, attrs.GetFloat("beta", 1.0f));
  ORRERY_ASSIGN_OR_RETURN(int64_t ta, attrs.GetInt("transA", 0));
  ORRERY_ASSIGN_OR_RETURN(int64_t tb, attrs.GetInt("transB", 0));
  p.trans_a = ta != 0;
  p.trans_b = tb != 0;
  return p;
}

// C at #2 unless #2 is the residual (then C is absent).
int BiasIndex(size_t count, const Fusion& f) {
  if (f.residual) return count == 4 ? 2 : -1;
  return count >= 3 ? 2 : -1;
}

Status InferGemm(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const TensorType& a = ctx.inputs[0];
  const TensorType& b = ctx.inputs[1];
  ORRERY_RETURN_IF_ERROR(RequireDType(a, "input A", {DType::kFloat32}));
  ORRERY_RETURN_IF_ERROR(RequireDType(b, "input B", {DType::kFloat32}));
  if (a.shape.size() != 2 || b.shape.size() != 2) {
    return Status::InvalidArgument("A and B must be 2-D, got " + ShapeToString(a.shape) +
                                   " and " + ShapeToString(b.shape));
  }
  ORRERY_ASSIGN_OR_RETURN(GemmParams p, ReadParams(ctx.attrs));
  ORRERY_ASSIGN_OR_RETURN(Fusion f, ReadFusion(ctx.attrs, "Gemm"));
  const int64_t m = p.trans_a ? a.shape[1] : a.shape[0];
  const int64_t ka = p.trans_a ? a.shape[0] : a.shape[1];
  const int64_t kb = p.trans_b ? b.shape[1] : b.shape[0];
  const int64_t n = p.trans_b ? b.shape[0] : b.shape[1];
  if (ka != kb) {
    return Status::InvalidArgument("inner dimensions differ: op(A) is " + std::to_string(m) +
                                   "x" + std::to_string(ka) + ", op(B) is " +
                                   std::to_string(kb) + "x" + std::to_string(n));
  }
  const Shape out{m, n};
  const int ci = BiasIndex(ctx.inputs.size(), f);
  if (ci >= 0 && ctx.inputs[static_cast<size_t>(ci)].present()) {
    const TensorType& c = ctx.inputs[static_cast<size_t>(ci)];
    ORRERY_RETURN_IF_ERROR(RequireDType(c, "input C", {DType::kFloat32}));
    if (!IsUnidirectionalBroadcastable(c.shape, out)) {
      return Status::InvalidArgument("C of shape " + ShapeToString(c.shape) +
                                     " does not broadcast to " + ShapeToString(out));
    }
  }
  ORRERY_RETURN_IF_ERROR(CheckFusedInputs(ctx.inputs, f, 3, out, "Gemm"));
  outputs->assign(1, TensorType{DType::kFloat32, out});
  return Status::Ok();
}

// Constant operands packed once, shared by the node's preparations.
enum class BiasMode { kNone, kColumn, kRow, kFill };

struct GemmPrepared final : PreparedKernel {
  GemmParams p;
  Fusion fusion;
  int c_index = -1, z_index = -1;
  int64_t m = 0, n = 0, k = 0;
  BiasMode bias = BiasMode::kNone;
  std::vector<float> scaled_bias;  // beta * C when C is constant and beta != 1
  std::shared_ptr<const PackedOperand> packed_a, packed_b;
};

// The packed operand from the node cache, or packed now. A cached one of
// other dimensions (imported state that does not fit) is replaced by a
// fresh pack for this call.
Result<std::shared_ptr<const PackedOperand>> PackThrough(
    NodeCache* cache, uint32_t key, PackedMatrix::Side side, int64_t rows, int64_t cols,
    const Tensor& values, FunctionRef<PackedMatrix()> pack) {
  auto make = [&]() -> Result<std::shared_ptr<const PreparedKernel>> {
    if (values.unbound()) return PackedValuesMissing("Gemm", side == PackedMatrix::Side::kRight ? "B" : "A");
    return std::shared_ptr<const PreparedKernel>(std::make_shared<PackedOperand>(pack()));
  };
  std::shared_ptr<const PreparedKernel> got;
  if (cache != nullptr) {
    ORRERY_ASSIGN_OR_RETURN(got, cache->GetOrMake(key, make));
    const auto* op = dynamic_cast<const PackedOperand*>(got.get());
    if (op == nullptr || !MatchesPacked(op->matrix, side, rows, cols)) {
      ORRERY_ASSIGN_OR_RETURN(got, make());
    }
  } else {
    ORRERY_ASSIGN_OR_RETURN(got, make());
  }
  return std::static_pointer_cast<const PackedOperand>(got);
}

Result<Prepared> PrepareGemm(const PrepareContext& ctx) {
  auto g = std::make_shared<GemmPrepared>();
  ORRERY_ASSIGN_OR_RETURN(g->p, ReadParams(ctx.attrs));
  ORRERY_ASSIGN_OR_RETURN(g->fusion, ReadFusion(ctx.attrs, "Gemm"));
  const GemmParams& p = g->p;
  const Shape& as = ctx.inputs[0].shape;
  const Shape& bs = ctx.inputs[1].shape;
  g->m = ctx.outputs[0].shape[0];
  g->n = ctx.outputs[0].shape[1];
  g->k = p.trans_a ? as[0] : as[1];
  g->c_index = BiasIndex(ctx.inputs.size(), g->fusion);
  if (g->c_index >= 0 && !ctx.inputs[static_cast<size_t>(g->c_index)].present()) g->c_index = -1;
  if (g->fusion.residual) g->z_index = static_cast<int>(ctx.inputs.size()) - 1;
  if (g->c_index >= 0 && p.beta != 0.0f) {
    const Shape& cs = ctx.inputs[static_cast<size_t>(g->c_index)].shape;
    const int64_t rows = cs.size() == 2 ? cs[0] : 1;
    const int64_t cols = cs.empty() ? 1 : cs.back();
    const bool column = rows == 1 && cols == g->n && g->n > 1;
    const bool row = cs.size() == 2 && cols == 1 && rows == g->m && g->m > 1;
    g->bias = column ? BiasMode::kColumn : row ? BiasMode::kRow : BiasMode::kFill;
    const Tensor* c = ctx.value(static_cast<size_t>(g->c_index));
    if ((column || row) && p.beta != 1.0f) {
      if (c == nullptr) {
        g->bias = BiasMode::kFill;
      } else {
        const float* cd = c->data<float>();
        for (int64_t i = 0; i < c->num_elements(); ++i) g->scaled_bias.push_back(p.beta * cd[i]);
      }
    }
  }
  if (g->m > 0 && g->n > 0 && g->k > 0) {
    if (const Tensor* b = ctx.value(1); b != nullptr) {
      ORRERY_ASSIGN_OR_RETURN(g->packed_b, PackThrough(ctx.node_cache, 0, PackedMatrix::Side::kRight,
                                                           g->k, g->n, *b, [&] {
                                return PackedMatrix::PackRight(b->data<float>(), bs[1],
                                                               p.trans_b, g->k, g->n);
                              }));
    }
    if (const Tensor* a = ctx.value(0); a != nullptr) {
      ORRERY_ASSIGN_OR_RETURN(g->packed_a, PackThrough(ctx.node_cache, 1, PackedMatrix::Side::kLeft,
                                                           g->m, g->k, *a, [&] {
                                return PackedMatrix::PackLeft(a->data<float>(), as[1], p.trans_a,
                                                              g->m, g->k);
                              }));
    }
  }
  const int64_t scratch = SgemmScratchBytes({g->m, g->n, g->k}, g->packed_a != nullptr,
                                            g->packed_b != nullptr);
  return Prepared{.kernel = std::move(g), .scratch_bytes = scratch};
}

Status ComputeGemm(const KernelContext& ctx, std::span<Tensor> outputs) {
  if (ctx.prepared == nullptr) {
    const TensorType out_type{DType::kFloat32, outputs[0].shape()};
    return PrepareAndCompute(PrepareGemm, ComputeGemm, ctx, {&out_type, 1}, outputs);
  }
  const auto& g = static_cast<const GemmPrepared&>(*ctx.prepared);
  const Tensor& a = *ctx.inputs[0];
  const Tensor& b = *ctx.inputs[1];
  Tensor& y = outputs[0];
  const int64_t m = g.m, n = g.n;
  if (y.shape().size() != 2 || y.shape()[0] != m || y.shape()[1] != n) {
    return Status::Internal("Gemm: output shape differs from the plan");
  }
  float* out = y.data<float>();
  Epilogue ep;
  ep.alpha = g.p.alpha;
  g.fusion.ApplyTo(&ep);
  const Tensor* c = g.c_index >= 0 ? ctx.inputs[static_cast<size_t>(g.c_index)] : nullptr;
  if (c != nullptr && m * n > 0) {
    const float* cd = g.scaled_bias.empty() ? c->data<float>() : g.scaled_bias.data();
    switch (g.bias) {
      case BiasMode::kNone: break;
      case BiasMode::kColumn: ep.col_bias = cd; break;
      case BiasMode::kRow: ep.row_bias = cd; break;
      case BiasMode::kFill: {
        // C broadcasts unidirectionally to [m, n] (rank 0, 1 or 2, right-aligned).
        const Shape& cshape = c->shape();
        const int64_t crows = cshape.size() == 2 ? cshape[0] : 1;
        const int64_t ccols = cshape.empty() ? 1 : cshape.back();
        const int64_t row_stride = crows == 1 ? 0 : ccols;
        const int64_t col_stride = ccols == 1 ? 0 : 1;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            out[i * n + j] = g.p.beta * cd[i * row_stride + j * col_stride];
          }
        }
        ep.accumulate = true;
        break;
      }
    }
  }
  if (g.z_index >= 0) {
    ep.residual = ctx.inputs[static_cast<size_t>(g.z_index)]->data<float>();
    ep.ld_residual = n;
  }
  LeftOperand lo{.data = a.data<float>(), .ld = a.shape()[1], .trans = g.p.trans_a};
  if (g.packed_a != nullptr) lo.packed = &g.packed_a->matrix;
  RightOperand ro{.data = b.data<float>(), .ld = b.shape()[1], .trans = g.p.trans_b};
  if (g.packed_b != nullptr) ro.packed = &g.packed_b->matrix;
  Sgemm({m, n, g.k}, lo, ro, out, n, ep, ctx.scratch, ctx.threads);
  return Status::Ok();
}

}  // namespace

Status RegisterGemmKernels(OpRegistry* registry) {
  return registry->Register(KernelDef{.op_type = "Gemm",
                                      .backend = Backend::kCpu,
                                      .min_inputs = 2,
                                      .max_inputs = 4,
                                      .infer = InferGemm,
                                      .compute = ComputeGemm,
                                      .prepare = PrepareGemm,
                                      .fusions = kFuseResidual | kFuseActivation,
                                      .overwrites_outputs = true,
                                      .serialize_cached = SerializePackedOperand,
                                      .deserialize_cached = DeserializePackedOperand,
                                      // B under key 0, A (when constant) under 1.
                                      .packed_input = [](uint32_t key) { return key == 0 ? 1 : key == 1 ? 0 : -1; }});
}

}  // namespace orrery::ops::cpu
