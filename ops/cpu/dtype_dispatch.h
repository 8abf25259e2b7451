// Compile-time dtype lists for templated kernels: one list per op names the
// C++ element types it supports, and the same list drives both the inference
// check (an "unsupported dtype" error naming the op) and the compute dispatch,
// so the two can never disagree.
//
// Bool tensors are not in these lists: their bytes come from untrusted data
// and may hold values other than 0/1, which is undefined behaviour to load as
// C++ bool. Kernels that take bool read it as uint8_t and test `!= 0`.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

#include "base/status.h"
#include "ops/registry.h"
#include "ops/tensor.h"

namespace orrery::ops::cpu {

template <typename T> struct TypeTag { using type = T; };
template <typename... Ts> struct TypeList {};

using FloatTypes = TypeList<float, double>;
using SignedIntTypes = TypeList<int8_t, int16_t, int32_t, int64_t>;
using IntTypes = TypeList<int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t>;
using UnsignedIntTypes = TypeList<uint8_t, uint16_t, uint32_t, uint64_t>;
using NumericTypes = TypeList<float, double, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t,
                              uint32_t, uint64_t>;
using SignedNumericTypes = TypeList<float, double, int8_t, int16_t, int32_t, int64_t>;
// Float types plus the 32/64-bit integers most ONNX ops list.
using FloatAndWideIntTypes = TypeList<float, double, int32_t, int64_t, uint32_t, uint64_t>;

template <typename T>
constexpr DType DTypeOf() {
  if constexpr (std::is_same_v<T, float>) return DType::kFloat32;
  else if constexpr (std::is_same_v<T, double>) return DType::kFloat64;
  else if constexpr (std::is_same_v<T, int8_t>) return DType::kInt8;
  else if constexpr (std::is_same_v<T, int16_t>) return DType::kInt16;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::kInt32;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::kInt64;
  else if constexpr (std::is_same_v<T, uint8_t>) return DType::kUint8;
  else if constexpr (std::is_same_v<T, uint16_t>) return DType::kUint16;
  else if constexpr (std::is_same_v<T, uint32_t>) return DType::kUint32;
  else if constexpr (std::is_same_v<T, uint64_t>) return DType::kUint64;
  else static_assert(sizeof(T) == 0, "no DType for this C++ type");
}

template <typename... Ts>
constexpr bool InList(DType d, TypeList<Ts...>) {
  return ((d == DTypeOf<Ts>()) || ...);
}

template <typename... Ts>
std::string ListNames(TypeList<Ts...>) {
  std::string names;
  ((names += (names.empty() ? "" : ", "), names += DTypeName(DTypeOf<Ts>())), ...);
  return names;
}

// "Op: unsupported dtype float16 for input X (supported: float32, float64)".
inline Status UnsupportedDType(std::string_view op, std::string_view what, DType got,
                               const std::string& supported) {
  return Status::InvalidArgument(std::string(op) + ": unsupported dtype " +
                                 std::string(DTypeName(got)) + " for " + std::string(what) +
                                 " (supported: " + supported + ")");
}

// OK when `t` is present and its dtype is in `list`.
template <typename List>
Status RequireTypeIn(std::string_view op, const TensorType& t, std::string_view what, List list) {
  if (!t.present()) return Status::InvalidArgument(std::string(op) + ": " + std::string(what) +
                                                   " is missing");
  if (InList(t.dtype, list)) return Status::Ok();
  return UnsupportedDType(op, what, t.dtype, ListNames(list));
}

// Calls fn(TypeTag<T>{}) for the T in `list` whose DType is `d`.
template <typename... Ts, typename Fn>
Status Dispatch(DType d, TypeList<Ts...>, Fn&& fn) {
  // The error is built only on a miss: this runs on every kernel call, and
  // the inference path must not allocate in steady state.
  Status st;
  const bool found = ((d == DTypeOf<Ts>() ? (st = fn(TypeTag<Ts>{}), true) : false) || ...);
  if (!found) {
    return Status::Internal("dtype " + std::string(DTypeName(d)) + " passed inference but has no kernel");
  }
  return st;
}

// Arithmetic in the unsigned type of at least int width, so that integer
// overflow wraps (two's complement) instead of being undefined or promoting
// to signed int (uint16 * uint16 overflows int).
template <typename T>
using WrapType = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <typename T> T WrapAdd(T a, T b) {
  return static_cast<T>(static_cast<WrapType<T>>(a) + static_cast<WrapType<T>>(b));
}
template <typename T> T WrapSub(T a, T b) {
  return static_cast<T>(static_cast<WrapType<T>>(a) - static_cast<WrapType<T>>(b));
}
template <typename T> T WrapMul(T a, T b) {
  return static_cast<T>(static_cast<WrapType<T>>(a) * static_cast<WrapType<T>>(b));
}
template <typename T> T WrapNeg(T a) {
  return static_cast<T>(WrapType<T>{0} - static_cast<WrapType<T>>(a));
}

// Value conversion with defined results everywhere: float -> integer
// saturates at the target's range and maps NaN to 0 (a plain cast is
// undefined behaviour out of range); integer -> integer wraps; anything else
// is a static_cast.
template <typename To, typename From>
To SaturatingCast(From v) {
  if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (std::isnan(v)) return To{0};
    // lowest() is 0 or -2^k, exact in any float type; max() may round up to
    // 2^k, and every value below that truncates into range.
    constexpr From lo = static_cast<From>(std::numeric_limits<To>::lowest());
    constexpr From hi = static_cast<From>(std::numeric_limits<To>::max());
    if (v <= lo) return std::numeric_limits<To>::lowest();
    if (v >= hi) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace orrery::ops::cpu
