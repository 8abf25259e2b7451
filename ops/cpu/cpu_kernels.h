// Registration entry points of the CPU kernel files; RegisterCpuKernels
// (ops/registry.h) calls them all.
#pragma once

#include "base/status.h"
#include "ops/registry.h"

namespace orrery::ops::cpu {

Status RegisterGemmKernels(OpRegistry* registry);         // Gemm
Status RegisterMatMulKernels(OpRegistry* registry);       // MatMul
Status RegisterElementwiseKernels(OpRegistry* registry);  // Add, Sub, Mul, Div, Pow, Mod, BitShift
Status RegisterActivationKernels(OpRegistry* registry);   // Relu, Sigmoid, Clip, Gelu, ...
Status RegisterSoftmaxKernels(OpRegistry* registry);      // Softmax, LogSoftmax, Hardmax
Status RegisterUnaryKernels(OpRegistry* registry);        // Abs, Neg, Sqrt, Exp, Log, Erf, ...
Status RegisterVariadicKernels(OpRegistry* registry);     // Max, Min, Sum, Mean
Status RegisterCompareLogicKernels(OpRegistry* registry); // Equal, Greater, ..., And, Not, Where
Status RegisterReduceKernels(OpRegistry* registry);       // Reduce*, ArgMax, ArgMin
Status RegisterCastKernels(OpRegistry* registry);         // Cast, CastLike
Status RegisterConvKernels(OpRegistry* registry);           // Conv
Status RegisterConvTransposeKernels(OpRegistry* registry);  // ConvTranspose
Status RegisterPoolKernels(OpRegistry* registry);  // MaxPool, AveragePool, LpPool, Global*Pool
Status RegisterNormalizationKernels(OpRegistry* registry);  // Batch/Instance/LayerNormalization
// Flatten, Reshape, Squeeze, Unsqueeze, Shape, Size, Dropout, Identity, Constant
Status RegisterShapeKernels(OpRegistry* registry);
Status RegisterTransposeKernels(OpRegistry* registry);    // Transpose, DepthToSpace, SpaceToDepth
Status RegisterConcatSplitKernels(OpRegistry* registry);  // Concat, Split
Status RegisterSliceKernels(OpRegistry* registry);        // Slice
Status RegisterGatherKernels(OpRegistry* registry);       // Gather, GatherElements, ScatterND
Status RegisterExpandTileKernels(OpRegistry* registry);   // Expand, Tile
Status RegisterPadKernels(OpRegistry* registry);          // Pad
Status RegisterResizeKernels(OpRegistry* registry);       // Resize, Upsample
// ConstantOfShape, Range, EyeLike, Trilu, NonZero, OneHot
Status RegisterMiscDataKernels(OpRegistry* registry);

}  // namespace orrery::ops::cpu
