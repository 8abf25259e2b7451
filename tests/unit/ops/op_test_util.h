// Helpers for kernel tests: run one registered CPU kernel the way the
// executor does (infer, allocate, compute, check).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "ops/attributes.h"
#include "ops/registry.h"
#include "ops/tensor.h"

namespace orrery::ops::testing {

// A tensor of `dtype` holding `values` (T must have the dtype's size).
template <typename T>
Tensor Make(DType dtype, Shape shape, std::vector<T> values) {
  Tensor t(dtype, std::move(shape));
  EXPECT_EQ(static_cast<size_t>(t.num_elements()), values.size());
  EXPECT_EQ(DTypeSize(dtype), sizeof(T));
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
  return t;
}

inline Tensor F32(Shape shape, std::vector<float> values) {
  return Make(DType::kFloat32, std::move(shape), std::move(values));
}

inline Tensor I64(Shape shape, std::vector<int64_t> values) {
  return Make(DType::kInt64, std::move(shape), std::move(values));
}

// n floats uniform in [lo, hi) from a fixed seed.
inline std::vector<float> RandomFloats(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(gen);
  return v;
}

// A float32 tensor of `shape` with RandomFloats' values in [-1, 1).
inline Tensor RandomTensor(Shape shape, uint32_t seed) {
  const int64_t n = NumElements(shape);
  return F32(std::move(shape), RandomFloats(n, seed));
}

// Heap scratch whose span() starts on a 64-byte boundary (the alignment
// KernelContext::scratch slices and Sgemm's scratch have).
class AlignedScratch {
 public:
  explicit AlignedScratch(size_t bytes) : storage_(bytes + 64) {}
  std::span<std::byte> span() {
    auto* base = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(storage_.data()) + 63) & ~uintptr_t{63});
    return {base, storage_.size() - 64};
  }

 private:
  std::vector<std::byte> storage_;
};

template <typename T>
std::vector<T> Values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.num_elements());
}

// Runs op_type on inputs (nullptr = absent optional input), on `threads`
// when given.
inline Result<std::vector<Tensor>> RunOp(const std::string& op_type,
                                         const std::vector<const Tensor*>& inputs,
                                         const Attributes& attrs = {}, int64_t opset = 13,
                                         ThreadGroup* threads = nullptr) {
  const KernelDef* def = OpRegistry::Global().Find(op_type, Backend::kCpu);
  if (def == nullptr) return Status::NotFound("no kernel " + op_type);
  std::vector<TensorType> types;
  for (const Tensor* t : inputs) {
    types.push_back(t == nullptr ? TensorType{} : TensorType{t->dtype(), t->shape()});
  }
  std::vector<TensorType> out_types;
  InferContext ictx{types, inputs, attrs, opset};
  ORRERY_RETURN_IF_ERROR(def->infer(ictx, &out_types));
  std::vector<Tensor> outs(out_types.size());
  if (def->alloc == OutputAlloc::kPreallocated) {
    for (size_t i = 0; i < outs.size(); ++i) {
      ORRERY_ASSIGN_OR_RETURN(outs[i], Tensor::Allocate(out_types[i].dtype, out_types[i].shape));
    }
  }
  KernelContext kctx{.inputs = inputs, .attrs = attrs, .opset = opset, .threads = threads};
  ORRERY_RETURN_IF_ERROR(PrepareAndCompute(def->prepare, def->compute, kctx, out_types, outs));
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].dtype() != out_types[i].dtype || outs[i].shape() != out_types[i].shape) {
      return Status::Internal("output does not match inferred type");
    }
  }
  return outs;
}

inline void ExpectNear(const std::vector<float>& got, const std::vector<float>& want,
                       float tol = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

}  // namespace orrery::ops::testing
