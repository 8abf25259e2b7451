// Output comparison for the ONNX conformance runner, with the rule of the
// ONNX backend-test runner (onnx/backend/test/runner/__init__.py,
// assert_similar_outputs): dtypes equal, then
// numpy.testing.assert_allclose(got, want, rtol, atol) with equal_nan.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "runtime/tensor.h"

namespace orrery::conformance {

// The backend-test defaults; onnx 1.12 has no per-case override for node
// tests (every node TestCase is built with these values).
struct Tolerance {
  double rtol = 1e-3;
  double atol = 1e-7;
};

// Why `got` does not match `want`.
struct Mismatch {
  enum class Kind { kDtype, kShape, kValue };
  Kind kind = Kind::kValue;
  int64_t index = -1;    // flat index of the first differing element (kValue)
  std::string position;  // that index as "[i, j, ...]"
  std::string got;       // the differing element, dtype or shape as text
  std::string want;
  int64_t count = 0;        // number of differing elements (kValue)
  double max_abs_diff = 0;  // over finite differing float pairs (kValue)

  // One line: "element 5 [1, 2]: got 1.5, want 1 (3 of 24 differ, max |diff| 0.5)".
  std::string ToString() const;
};

// Compares one output. Dtype and shape must match exactly. Floating types
// (float16/32/64, evaluated in double): |got - want| <= atol + rtol * |want|,
// NaN matches only NaN, +-inf only the same inf. Integers and bools must be
// equal (numpy's allclose would let large ints differ by rtol; exact is what
// integer kernels promise). nullopt when they match.
std::optional<Mismatch> CompareTensors(const Tensor& got, const Tensor& want,
                                       const Tolerance& tol = {});

// IEEE half -> double (float16 has no C++20 type).
double HalfToDouble(uint16_t bits);

}  // namespace orrery::conformance
