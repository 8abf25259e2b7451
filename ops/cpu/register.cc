#include "ops/cpu/cpu_kernels.h"
#include "ops/registry.h"

namespace orrery::ops {

Status RegisterCpuKernels(OpRegistry* registry) {
  ORRERY_RETURN_IF_ERROR(cpu::RegisterGemmKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterMatMulKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterElementwiseKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterActivationKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterSoftmaxKernels(registry));
  ORRERY_RETURN_IF_ERROR(cpu::RegisterShapeKernels(registry));
  return Status::Ok();
}

}  // namespace orrery::ops
