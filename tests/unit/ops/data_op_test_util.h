// Helpers for the shape / data-movement kernel tests: typed tensor builders
// for every dtype and a RunOp that also passes the node's output count
// (Split, Dropout) and can hide input values from inference (to check that
// value-dependent kernels ask for them with UNAVAILABLE).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "op_test_util.h"
#include "ops/attributes.h"
#include "ops/registry.h"
#include "ops/tensor.h"

namespace orrery::ops::testing {

// Make() comes from op_test_util.h.
inline Tensor I32(Shape shape, const std::vector<int32_t>& v) {
  return Make(DType::kInt32, std::move(shape), v);
}
inline Tensor F64(Shape shape, const std::vector<double>& v) {
  return Make(DType::kFloat64, std::move(shape), v);
}
inline Tensor U8(Shape shape, const std::vector<uint8_t>& v) {
  return Make(DType::kUint8, std::move(shape), v);
}
inline Tensor Bool(Shape shape, const std::vector<uint8_t>& v) {
  return Make(DType::kBool, std::move(shape), v);
}

// 0, 1, 2, ... as float32.
inline Tensor Iota(Shape shape) {
  Tensor t(DType::kFloat32, std::move(shape));
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

struct RunOptions {
  int64_t opset = 13;
  size_t num_outputs = 1;
  bool hide_values = false;  // inference sees no input values
};

inline Result<std::vector<Tensor>> TryOp(const std::string& op_type,
                                         const std::vector<const Tensor*>& inputs,
                                         const Attributes& attrs, RunOptions o = {}) {
  const KernelDef* def = OpRegistry::Global().Find(op_type, Backend::kCpu);
  if (def == nullptr) return Status::NotFound("no kernel " + op_type);
  std::vector<TensorType> types;
  for (const Tensor* t : inputs) {
    types.push_back(t == nullptr ? TensorType{} : TensorType{t->dtype(), t->shape()});
  }
  std::vector<const Tensor*> values = inputs;
  if (o.hide_values) values.assign(inputs.size(), nullptr);
  std::vector<TensorType> out_types;
  InferContext ictx{types, values, attrs, o.opset, o.num_outputs};
  ORRERY_RETURN_IF_ERROR(def->infer(ictx, &out_types));
  if (out_types.size() != o.num_outputs) return Status::Internal("wrong number of outputs");
  for (const TensorType& t : out_types) {
    ORRERY_RETURN_IF_ERROR(CheckedNumElements(t.shape, t.dtype).status());
  }
  std::vector<Tensor> outs(out_types.size());
  if (def->alloc == OutputAlloc::kPreallocated) {
    for (size_t i = 0; i < outs.size(); ++i) {
      ORRERY_ASSIGN_OR_RETURN(outs[i], Tensor::Allocate(out_types[i].dtype, out_types[i].shape));
    }
  }
  KernelContext kctx{inputs, attrs, o.opset};
  ORRERY_RETURN_IF_ERROR(PrepareAndCompute(def->prepare, def->compute, kctx, out_types, outs));
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].dtype() != out_types[i].dtype || outs[i].shape() != out_types[i].shape) {
      return Status::Internal("output " + std::to_string(i) + " does not match inferred type");
    }
  }
  return outs;
}

// Runs a single-output op and returns its output (failing the test on error).
inline Tensor Run1(const std::string& op_type, const std::vector<const Tensor*>& inputs,
                   const Attributes& attrs = {}, RunOptions o = {}) {
  auto r = TryOp(op_type, inputs, attrs, o);
  EXPECT_TRUE(r.ok()) << op_type << ": " << r.status().ToString();
  if (!r.ok() || r->empty()) return Tensor();
  return std::move((*r)[0]);
}

inline Attributes Attrs(std::initializer_list<std::pair<std::string, AttrValue>> kv) {
  Attributes a;
  for (const auto& [k, v] : kv) a.Set(k, v);
  return a;
}

inline ::testing::AssertionResult IsUnsupported(const Status& st) {
  if (st.code() == StatusCode::kInvalidArgument &&
      st.message().find("unsupported") != std::string::npos) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "expected an 'unsupported' INVALID_ARGUMENT, got " << st.ToString();
}

}  // namespace orrery::ops::testing
