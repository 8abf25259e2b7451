// Registration entry points of the CPU kernel files; RegisterCpuKernels
// (ops/registry.h) calls them all.
#pragma once

#include "base/status.h"
#include "ops/registry.h"

namespace orrery::ops::cpu {

Status RegisterGemmKernels(OpRegistry* registry);         // Gemm
Status RegisterMatMulKernels(OpRegistry* registry);       // MatMul
Status RegisterElementwiseKernels(OpRegistry* registry);  // Add, Sub, Mul, Div
Status RegisterActivationKernels(OpRegistry* registry);   // Relu, Sigmoid, Tanh
Status RegisterSoftmaxKernels(OpRegistry* registry);      // Softmax
Status RegisterShapeKernels(OpRegistry* registry);        // Flatten, Reshape, Identity, Constant

}  // namespace orrery::ops::cpu
