// Helpers for runtime tests that look inside plans: compile a ModelBuilder
// model to a base Plan and specialise it for given input types.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "model_builder.h"
#include "ops/registry.h"
#include "runtime/graph.h"
#include "runtime/plan.h"
#include "runtime/specialize.h"

namespace orrery::testing {

inline Result<std::shared_ptr<const runtime::Plan>> CompileBase(const ModelBuilder& b) {
  ORRERY_ASSIGN_OR_RETURN(runtime::Graph g, runtime::ImportModel(const_cast<ModelBuilder&>(b).model(),
                                                                 ops::OpRegistry::Global()));
  ORRERY_ASSIGN_OR_RETURN(runtime::Plan p, runtime::CompilePlan(g, ops::OpRegistry::Global()));
  return std::make_shared<const runtime::Plan>(std::move(p));
}

inline Result<std::shared_ptr<runtime::SpecializedPlan>> SpecializeModel(
    const ModelBuilder& b, std::vector<ops::TensorType> input_types) {
  ORRERY_ASSIGN_OR_RETURN(std::shared_ptr<const runtime::Plan> base, CompileBase(b));
  return runtime::Specialize(std::move(base), std::move(input_types), nullptr);
}

// The op type of every step a specialised plan executes, in order.
inline std::vector<std::string> OpTypes(const runtime::SpecializedPlan& sp) {
  std::vector<std::string> ops;
  for (const runtime::PlannedStep& ps : sp.steps) ops.push_back(ps.step->op_type);
  return ops;
}

inline Tensor F32(Shape shape, const std::vector<float>& v) {
  Tensor t(DType::kFloat32, std::move(shape));
  EXPECT_EQ(static_cast<size_t>(t.num_elements()), v.size());
  if (!v.empty()) std::memcpy(t.raw_data(), v.data(), v.size() * sizeof(float));
  return t;
}

inline Tensor I64(Shape shape, const std::vector<int64_t>& v) {
  Tensor t(DType::kInt64, std::move(shape));
  EXPECT_EQ(static_cast<size_t>(t.num_elements()), v.size());
  if (!v.empty()) std::memcpy(t.raw_data(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

inline std::vector<float> Floats(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.num_elements());
}

// Deterministic pseudo-random floats in [-1, 1).
inline std::vector<float> Ramp(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return v;
}

inline void ExpectAllNear(const std::vector<float>& got, const std::vector<float>& want,
                          float tol = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

// The base plan's reference executor on the same inputs (graph-input order).
inline std::vector<Tensor> Reference(const ModelBuilder& b, std::vector<Tensor> inputs) {
  auto base = CompileBase(b);
  EXPECT_TRUE(base.ok()) << base.status().ToString();
  if (!base.ok()) return {};
  auto out = runtime::ExecutePlan(**base, std::move(inputs));
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? std::move(out).value() : std::vector<Tensor>{};
}

}  // namespace orrery::testing
