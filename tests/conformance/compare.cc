#include "tests/conformance/compare.h"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace orrery::conformance {
namespace {

bool IsFloating(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kFloat16;
}

double FloatAt(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32:
      return static_cast<double>(t.data<float>()[i]);
    case DType::kFloat64:
      return t.data<double>()[i];
    case DType::kFloat16:
      return HalfToDouble(t.data<uint16_t>()[i]);
    default:
      return 0;
  }
}

// Integers are compared as their exact bits widened to 64; signedness is the
// same on both sides since dtypes already matched.
uint64_t IntBitsAt(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kBool:
      return t.data<uint8_t>()[i] != 0 ? 1 : 0;
    case DType::kUint8:
      return t.data<uint8_t>()[i];
    case DType::kInt8:
      return static_cast<uint64_t>(static_cast<int64_t>(t.data<int8_t>()[i]));
    case DType::kUint16:
      return t.data<uint16_t>()[i];
    case DType::kInt16:
      return static_cast<uint64_t>(static_cast<int64_t>(t.data<int16_t>()[i]));
    case DType::kInt32:
      return static_cast<uint64_t>(static_cast<int64_t>(t.data<int32_t>()[i]));
    case DType::kUint32:
      return t.data<uint32_t>()[i];
    case DType::kInt64:
      return static_cast<uint64_t>(t.data<int64_t>()[i]);
    case DType::kUint64:
      return t.data<uint64_t>()[i];
    default:
      return 0;
  }
}

std::string FormatElement(const Tensor& t, int64_t i) {
  char buf[64];
  switch (t.dtype()) {
    case DType::kFloat32:
    case DType::kFloat16:
      std::snprintf(buf, sizeof(buf), "%.9g", FloatAt(t, i));
      return buf;
    case DType::kFloat64:
      std::snprintf(buf, sizeof(buf), "%.17g", FloatAt(t, i));
      return buf;
    case DType::kBool:
      return IntBitsAt(t, i) != 0 ? "true" : "false";
    case DType::kUint8:
    case DType::kUint16:
    case DType::kUint32:
    case DType::kUint64:
      return std::to_string(IntBitsAt(t, i));
    default:
      return std::to_string(static_cast<int64_t>(IntBitsAt(t, i)));
  }
}

std::string Position(const Shape& shape, int64_t flat) {
  std::vector<int64_t> idx(shape.size(), 0);
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] > 0) {
      idx[d] = flat % shape[d];
      flat /= shape[d];
    }
  }
  return ShapeToString(idx);
}

// One pair of floats under allclose(equal_nan=True); `diff` gets |got - want|
// when both are finite.
bool FloatClose(double got, double want, const Tolerance& tol, double* diff) {
  *diff = 0;
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return got == want;
  *diff = std::fabs(got - want);
  return *diff <= tol.atol + tol.rtol * std::fabs(want);
}

}  // namespace

double HalfToDouble(uint16_t bits) {
  const int sign = (bits >> 15) & 1;
  const int exp = (bits >> 10) & 0x1f;
  const int frac = bits & 0x3ff;
  double v;
  if (exp == 0) {
    v = std::ldexp(static_cast<double>(frac), -24);  // subnormal
  } else if (exp == 31) {
    v = frac == 0 ? INFINITY : NAN;
  } else {
    v = std::ldexp(static_cast<double>(frac | 0x400), exp - 25);
  }
  return sign != 0 ? -v : v;
}

std::string Mismatch::ToString() const {
  switch (kind) {
    case Kind::kDtype:
      return "dtype: got " + got + ", want " + want;
    case Kind::kShape:
      return "shape: got " + got + ", want " + want;
    case Kind::kValue:
      break;
  }
  std::string s = "element " + std::to_string(index) + " " + position + ": got " + got + ", want " +
                  want + " (" + std::to_string(count) + " element" + (count == 1 ? "" : "s") +
                  " differ";
  if (max_abs_diff > 0) {
    char buf[48];
    std::snprintf(buf, sizeof(buf), ", max |diff| %.3g", max_abs_diff);
    s += buf;
  }
  return s + ")";
}

std::optional<Mismatch> CompareTensors(const Tensor& got, const Tensor& want,
                                       const Tolerance& tol) {
  if (got.dtype() != want.dtype()) {
    Mismatch m;
    m.kind = Mismatch::Kind::kDtype;
    m.got = std::string(DTypeName(got.dtype()));
    m.want = std::string(DTypeName(want.dtype()));
    return m;
  }
  if (got.shape() != want.shape()) {
    Mismatch m;
    m.kind = Mismatch::Kind::kShape;
    m.got = ShapeToString(got.shape());
    m.want = ShapeToString(want.shape());
    return m;
  }
  const int64_t n = want.num_elements();
  const bool floating = IsFloating(want.dtype());
  std::optional<Mismatch> m;
  for (int64_t i = 0; i < n; ++i) {
    double diff = 0;
    const bool same = floating ? FloatClose(FloatAt(got, i), FloatAt(want, i), tol, &diff)
                               : IntBitsAt(got, i) == IntBitsAt(want, i);
    if (same) continue;
    if (!m) {
      m.emplace();
      m->index = i;
      m->position = Position(want.shape(), i);
      m->got = FormatElement(got, i);
      m->want = FormatElement(want, i);
    }
    ++m->count;
    if (diff > m->max_abs_diff) m->max_abs_diff = diff;
  }
  return m;
}

}  // namespace orrery::conformance
