#include "ops/cpu/cpu_kernels.h"
#include "ops/registry.h"

namespace orrery::ops {

Status RegisterCpuKernels(OpRegistry* registry) {
  ORRERY_RETURN_IF_ERROR(cpu::RegisterGemmKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterMatMulKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterElementwiseKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterActivationKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterSoftmaxKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterUnaryKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterVariadicKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterCompareLogicKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterReduceKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterCastKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterConvKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterConvTransposeKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterPoolKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterNormalizationKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterShapeKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterTransposeKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterConcatSplitKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterSliceKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterGatherKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterExpandTileKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterPadKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterResizeKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterMiscDataKernels(registry));
  // Kernels that write every element of their outputs, so the executor
  // skips zero-filling them (checked by the conformance suite and the real
  // models with ORRERY_POISON_OUTPUTS=1). Conv, Gemm and MatMul set it in
  // their definitions.
  for (const char* op :
       {"Add", "Sub", "Mul", "Div", "Pow", "Relu", "LeakyRelu", "Elu", "Selu", "HardSigmoid",
        "HardSwish", "Sigmoid", "Tanh", "Softplus", "Gelu", "PRelu", "Clip", "Exp", "Log", "Sqrt",
        "Erf", "Neg", "Abs", "Reciprocal", "Softmax", "LogSoftmax", "BatchNormalization",
        "LayerNormalization", "InstanceNormalization", "MaxPool", "AveragePool",
        "GlobalAveragePool", "GlobalMaxPool", "Concat", "Transpose"}) {
    if (registry->Find(op, Backend::kCpu) != nullptr) {
      ORRERY_RETURN_IF_ERROR(registry->SetOverwritesOutputs(op, Backend::kCpu));
    }
  }
  // Kernels whose output types never depend on input values and whose
  // Compute range-checks any value it uses as an index (Gather*), or uses
  // values only as data (arithmetic, comparisons, casts): no per-run
  // re-inference for them (KernelDef::values_checked_in_compute).
  for (const char* op :
       {"Gather", "GatherElements", "Add", "Sub", "Mul", "Div", "Equal", "Greater", "Less",
        "GreaterOrEqual", "LessOrEqual", "Not", "And", "Or", "Xor", "Where", "Cast", "Neg", "Abs",
        "Max", "Min", "Sum", "Concat", "Identity"}) {
    if (registry->Find(op, Backend::kCpu) != nullptr) {
      ORRERY_RETURN_IF_ERROR(registry->SetValuesCheckedInCompute(op, Backend::kCpu));
    }
  }
  return Status::Ok();
}

}  // namespace orrery::ops
