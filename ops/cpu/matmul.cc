// MatMul with numpy semantics: N-d batches broadcast, 1-D operands promoted
// (A: [K] -> [1, K], B: [K] -> [K, 1]) and the promoted dim removed after;
// plus the runtime's fused forms (ops/cpu/gemm/fusion.h): a bias [N] at #2
// (_fused_bias), an activation and a residual Z (the last input, the output's
// shape): Y = act(A B + bias + Z).
// Prepare packs a constant 2-D B once per node (NodeCache). When B has no
// batch dims, A's batches fold into M: one GEMM for the whole call.
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

struct MatMulDims {
  Shape batch_a, batch_b, batch_out;
  int64_t m = 0, k = 0, n = 0;
  Shape out;
};

Result<MatMulDims> ComputeDims(const Shape& a, const Shape& b) {
  if (a.empty() || b.empty()) {
    return Status::InvalidArgument("inputs must have rank >= 1, got " + ShapeToString(a) +
                                   " and " + ShapeToString(b));
  }
  MatMulDims d;
  const bool a_vec = a.size() == 1;
  const bool b_vec = b.size() == 1;
  d.m = a_vec ? 1 : a[a.size() - 2];
  d.k = a.back();
  const int64_t kb = b_vec ? b[0] : b[b.size() - 2];
  d.n = b_vec ? 1 : b.back();
  if (d.k != kb) {
    return Status::InvalidArgument("inner dimensions differ: " + ShapeToString(a) + " x " +
                                   ShapeToString(b));
  }
  if (!a_vec) d.batch_a.assign(a.begin(), a.end() - 2);
  if (!b_vec) d.batch_b.assign(b.begin(), b.end() - 2);
  ORRERY_ASSIGN_OR_RETURN(d.batch_out, BroadcastShapes(d.batch_a, d.batch_b));
  d.out = d.batch_out;
  if (!a_vec) d.out.push_back(d.m);
  if (!b_vec) d.out.push_back(d.n);
  return d;
}

Status InferMatMul(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_RETURN_IF_ERROR(RequireDType(ctx.inputs[0], "input A", {DType::kFloat32}));
  ORRERY_RETURN_IF_ERROR(RequireDType(ctx.inputs[1], "input B", {DType::kFloat32}));
  ORRERY_ASSIGN_OR_RETURN(MatMulDims d, ComputeDims(ctx.inputs[0].shape, ctx.inputs[1].shape));
  ORRERY_ASSIGN_OR_RETURN(Fusion f, ReadFusion(ctx.attrs, "MatMul"));
  if (f.bias) {
    if (ctx.inputs.size() < 3 || !ctx.inputs[2].present()) {
      return Status::InvalidArgument("MatMul: _fused_bias needs the bias as input #2");
    }
    ORRERY_RETURN_IF_ERROR(RequireDType(ctx.inputs[2], "bias", {DType::kFloat32}));
    if (ctx.inputs[2].shape != Shape{d.n}) {
      return Status::InvalidArgument("MatMul: fused bias must have shape [" +
                                     std::to_string(d.n) + "], got " +
                                     ShapeToString(ctx.inputs[2].shape));
    }
  }
  ORRERY_RETURN_IF_ERROR(CheckFusedInputs(ctx.inputs, f, f.bias ? 3 : 2, d.out, "MatMul"));
  outputs->assign(1, TensorType{DType::kFloat32, d.out});
  return Status::Ok();
}


struct MatMulPrepared final : PreparedKernel {
  Fusion fusion;
  int z_index = -1;
  int64_t m = 0, n = 0, k = 0;
  int64_t batches = 0;
  bool folded = false;  // B has no batch dims: one GEMM of (batches * m) rows
  // Per output batch, the A and B matrix offsets in floats (unfolded path).
  std::vector<int64_t> a_off, b_off;
  std::shared_ptr<const PackedOperand> packed_b;  // constant 2-D B
};

Result<Prepared> PrepareMatMul(const PrepareContext& ctx) {
  auto p = std::make_shared<MatMulPrepared>();
  ORRERY_ASSIGN_OR_RETURN(MatMulDims d, ComputeDims(ctx.inputs[0].shape, ctx.inputs[1].shape));
  ORRERY_ASSIGN_OR_RETURN(p->fusion, ReadFusion(ctx.attrs, "MatMul"));
  if (p->fusion.residual) p->z_index = static_cast<int>(ctx.inputs.size()) - 1;
  p->m = d.m;
  p->n = d.n;
  p->k = d.k;
  p->batches = NumElements(d.batch_out);
  p->folded = d.batch_b.empty();
  if (!p->folded) {
    const std::vector<int64_t> sa = BroadcastStrides(d.batch_a, d.batch_out);
    const std::vector<int64_t> sb = BroadcastStrides(d.batch_b, d.batch_out);
    const size_t rank = d.batch_out.size();
    for (int64_t bi = 0; bi < p->batches; ++bi) {
      int64_t rem = bi, ao = 0, bo = 0;
      for (size_t i = rank; i-- > 0;) {
        const int64_t coord = rem % d.batch_out[i];
        rem /= d.batch_out[i];
        ao += coord * sa[i];
        bo += coord * sb[i];
      }
      p->a_off.push_back(ao * d.m * d.k);
      p->b_off.push_back(bo * d.k * d.n);
    }
  }
  const Tensor* b = ctx.value(1);
  if (p->folded && b != nullptr && d.n > 0 && d.k > 0) {
    auto make = [&]() -> Result<std::shared_ptr<const PreparedKernel>> {
      if (b->unbound()) return PackedValuesMissing("MatMul", "B");
      return std::shared_ptr<const PreparedKernel>(std::make_shared<PackedOperand>(
          PackedMatrix::PackRight(b->data<float>(), d.n, false, d.k, d.n)));
    };
    std::shared_ptr<const PreparedKernel> got;
    if (ctx.node_cache != nullptr) {
      ORRERY_ASSIGN_OR_RETURN(got, ctx.node_cache->GetOrMake(0, make));
      // Imported state of other dimensions: pack for this call instead.
      const auto* op = dynamic_cast<const PackedOperand*>(got.get());
      if (op == nullptr || !MatchesPacked(op->matrix, PackedMatrix::Side::kRight, d.k, d.n)) {
        ORRERY_ASSIGN_OR_RETURN(got, make());
      }
    } else {
      ORRERY_ASSIGN_OR_RETURN(got, make());
    }
    p->packed_b = std::static_pointer_cast<const PackedOperand>(got);
  }
  const GemmShape shape{p->folded ? p->batches * p->m : p->m, p->n, p->k};
  const int64_t scratch = SgemmScratchBytes(shape, false, p->packed_b != nullptr);
  return Prepared{.kernel = std::move(p), .scratch_bytes = scratch};
}

Status ComputeMatMul(const KernelContext& ctx, std::span<Tensor> outputs) {
  if (ctx.prepared == nullptr) {
    const TensorType out_type{DType::kFloat32, outputs[0].shape()};
    return PrepareAndCompute(PrepareMatMul, ComputeMatMul, ctx, {&out_type, 1}, outputs);
  }
  const auto& p = static_cast<const MatMulPrepared&>(*ctx.prepared);
  Tensor& y = outputs[0];
  if (y.num_elements() != p.batches * p.m * p.n) {
    return Status::Internal("MatMul: output shape differs from the plan");
  }
  if (y.num_elements() == 0) return Status::Ok();
  const float* ad = ctx.inputs[0]->data<float>();
  const float* bd = ctx.inputs[1]->data<float>();
  float* yd = y.data<float>();
  Epilogue ep;
  p.fusion.ApplyTo(&ep);
  if (p.fusion.bias) ep.col_bias = ctx.inputs[2]->data<float>();
  const float* zd =
      p.z_index >= 0 ? ctx.inputs[static_cast<size_t>(p.z_index)]->data<float>() : nullptr;
  ep.ld_residual = p.n;
  if (p.folded) {
    ep.residual = zd;
    RightOperand ro{.data = bd, .ld = p.n};
    if (p.packed_b != nullptr) ro.packed = &p.packed_b->matrix;
    Sgemm({p.batches * p.m, p.n, p.k}, LeftOperand{.data = ad, .ld = p.k}, ro, yd, p.n, ep,
          ctx.scratch, ctx.threads);
    return Status::Ok();
  }
  const int64_t y_mat = p.m * p.n;
  auto one = [&](int64_t bi, std::span<std::byte> scratch, ThreadGroup* threads) {
    Epilogue e = ep;
    e.residual = zd != nullptr ? zd + bi * y_mat : nullptr;
    Sgemm({p.m, p.n, p.k}, LeftOperand{.data = ad + p.a_off[static_cast<size_t>(bi)], .ld = p.k},
          RightOperand{.data = bd + p.b_off[static_cast<size_t>(bi)], .ld = p.n},
          yd + bi * y_mat, p.n, e, scratch, threads);
  };
  if (NumThreads(ctx.threads) > 1 && p.batches >= NumThreads(ctx.threads)) {
    // Batches (attention heads) across threads: one fork-join per call, each
    // GEMM on its thread's scratch slice.
    ParallelFor(ctx.threads, p.batches,
                [&](int64_t bi, int thread) { one(bi, ThreadScratch(ctx, thread), nullptr); });
  } else {
    for (int64_t bi = 0; bi < p.batches; ++bi) one(bi, ctx.scratch, ctx.threads);
  }
  return Status::Ok();
}

}  // namespace

Status RegisterMatMulKernels(OpRegistry* registry) {
  return registry->Register(KernelDef{.op_type = "MatMul",
                                      .backend = Backend::kCpu,
                                      .min_inputs = 2,
                                      .max_inputs = 4,
                                      .infer = InferMatMul,
                                      .compute = ComputeMatMul,
                                      .prepare = PrepareMatMul,
                                      .fusions = kFuseBias | kFuseResidual | kFuseActivation,
                                      .overwrites_outputs = true,
                                      .serialize_cached = SerializePackedOperand,
                                      .deserialize_cached = DeserializePackedOperand,
                                      .packed_input = [](uint32_t key) { return key == 0 ? 1 : -1; }});
}

}  // namespace orrery::ops::cpu
