// Elementwise loop drivers shared by the unary, binary, comparison, variadic
// and activation kernels. Each takes the per-element operation as a functor
// template argument, so the inner loops are plain indexed loops the compiler
// inlines and vectorises (no per-element calls through pointers).
//
// Binary and n-ary drivers follow numpy broadcasting: a fast path when every
// input covers the whole output or is a single element, otherwise the
// collapsed strided loop from ops/broadcast.h, whose innermost runs are again
// specialised for contiguous and broadcast (step 0) operands.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include "ops/broadcast.h"
#include "ops/cpu/vec/vec.h"
#include "ops/parallel.h"
#include "ops/tensor.h"

namespace orrery::ops::cpu {

// Elementwise work below this many elements stays on the calling thread:
// waking a second thread costs more than it saves.
inline constexpr int64_t kParallelElements = int64_t{1} << 16;
// The same for memory-bound loops (a compare or an add per element: Relu,
// Clip, binary arithmetic): one core moves most of the bytes two would, so
// a split pays only when the loop is long against a second thread's
// wake-up (tens of microseconds after a long Conv): at 64K elements Clip
// and Add in MobileNetV2 got slower with 2 threads. At 256K (1 MiB of
// float32; the transformer's residual Add and score Div at batch 8) the
// split saves time, and the second thread stays awake for the next step.
inline constexpr int64_t kParallelMemoryBoundElements = int64_t{1} << 18;
// Values per task of row kernels with several passes or an exp per value
// (Softmax, LayerNorm): ~10 us of work, well above a task hand-off, so an
// attention softmax of 4 x 128 x 128 splits into 8 tasks instead of one.
inline constexpr int64_t kParallelRowElements = int64_t{1} << 13;

// Runs fn(begin, end) over [0, n) in chunks on `threads` when n is at least
// `min_elements`, else once on this thread. Chunks are multiples of 64
// elements so vector loops keep whole lines.
template <typename Fn>
void ParallelChunks(ThreadGroup* threads, int64_t n, Fn&& fn,
                    int64_t min_elements = kParallelElements) {
  const int t = NumThreads(threads);
  if (t <= 1 || n < min_elements) {
    fn(int64_t{0}, n);
    return;
  }
  const int64_t tasks = 4 * static_cast<int64_t>(t);
  const int64_t chunk = ((n + tasks - 1) / tasks + 63) / 64 * 64;
  ParallelFor(threads, (n + chunk - 1) / chunk, [&](int64_t task, int) {
    const int64_t lo = task * chunk;
    fn(lo, lo + chunk < n ? lo + chunk : n);
  });
}

// Ops with a vectorised float32 form (ops/cpu/vec) name it: a unary op's
// VecUnary() returns {op, a, b} (parameters as vec::Unary documents), a
// binary op has a static kVecBinary.
struct VecUnaryOp {
  vec::Unary op;
  float a = 0, b = 0;
};
template <typename F>
concept HasVecUnary = requires(const F& f) { f.VecUnary(); };
template <typename F>
concept HasVecBinary = requires { F::kVecBinary; };

// Whether a vectorised unary op costs about as much as reading and writing
// its element (no exp / log / division chains).
inline bool MemoryBound(vec::Unary op) {
  switch (op) {
    case vec::Unary::kRelu:
    case vec::Unary::kLeakyRelu:
    case vec::Unary::kClip:
    case vec::Unary::kAbs:
    case vec::Unary::kNeg:
    case vec::Unary::kHardSigmoid:
    case vec::Unary::kHardSwish:
      return true;
    default:
      return false;
  }
}

// y[i] = f(x[i]) over the whole tensor.
template <typename In, typename Out, typename F>
void UnaryMap(const Tensor& x, Tensor& y, F f, ThreadGroup* threads = nullptr) {
  const In* __restrict xd = x.data<In>();
  Out* __restrict yd = y.data<Out>();
  const int64_t n = y.num_elements();
  if constexpr (std::is_same_v<In, float> && std::is_same_v<Out, float> && HasVecUnary<F>) {
    // A named struct, not a structured binding: Clang 14 (the fuzz build)
    // cannot capture bindings in the lambda.
    const VecUnaryOp v = f.VecUnary();
    const vec::Kernels& k = vec::Best();
    ParallelChunks(
        threads, n,
        [&](int64_t lo, int64_t hi) { k.unary(v.op, v.a, v.b, xd + lo, yd + lo, hi - lo); },
        MemoryBound(v.op) ? kParallelMemoryBoundElements : kParallelElements);
  } else {
    ParallelChunks(threads, n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) yd[i] = f(xd[i]);
    });
  }
}

// One run of a binary loop: y[i] = f(a[i * sa], b[i * sb]), steps 0 or 1.
template <typename A, typename B, typename Out, typename F>
inline void BinaryRun(const A* __restrict pa, const B* __restrict pb, Out* __restrict py, int64_t n,
                      int64_t sa, int64_t sb, F& f) {
  if constexpr (std::is_same_v<A, float> && std::is_same_v<B, float> &&
                std::is_same_v<Out, float> && HasVecBinary<F>) {
    if (sa <= 1 && sb <= 1) {
      vec::Best().binary(F::kVecBinary, pa, sa, pb, sb, py, n);
      return;
    }
  }
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i) py[i] = f(pa[i], pb[i]);
  } else if (sa == 1 && sb == 0) {
    const B bv = pb[0];
    for (int64_t i = 0; i < n; ++i) py[i] = f(pa[i], bv);
  } else if (sa == 0 && sb == 1) {
    const A av = pa[0];
    for (int64_t i = 0; i < n; ++i) py[i] = f(av, pb[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) py[i] = f(pa[i * sa], pb[i * sb]);
  }
}

// y = f(a, b) with numpy broadcasting; y's shape is the broadcast shape.
template <typename A, typename B, typename Out, typename F>
void BroadcastBinary(const Tensor& a, const Tensor& b, Tensor& y, F f,
                     ThreadGroup* threads = nullptr) {
  const A* ad = a.data<A>();
  const B* bd = b.data<B>();
  Out* yd = y.data<Out>();
  const int64_t n = y.num_elements();
  if (n == 0) return;
  const int64_t na = a.num_elements();
  const int64_t nb = b.num_elements();
  // An input with as many elements as the output is laid out like it.
  if ((na == n || na == 1) && (nb == n || nb == 1)) {
    const int64_t sa = na == n ? 1 : 0, sb = nb == n ? 1 : 0;
    ParallelChunks(
        threads, n,
        [&](int64_t lo, int64_t hi) {
          BinaryRun<A, B, Out>(ad + lo * sa, bd + lo * sb, yd + lo, hi - lo, sa, sb, f);
        },
        kParallelMemoryBoundElements);
    return;
  }
  const BinaryLoop loop = MakeBinaryLoop(a.shape(), b.shape(), y.shape());
  if (NumThreads(threads) > 1 && n >= kParallelMemoryBoundElements && loop.dims.size() >= 2) {
    // One task per index of the outermost loop dim.
    BinaryLoop sub;
    for (size_t j = 1; j < loop.dims.size(); ++j) {
      sub.dims.push_back(loop.dims[j]);
      sub.a_strides.push_back(loop.a_strides[j]);
      sub.b_strides.push_back(loop.b_strides[j]);
    }
    const int64_t inner = n / loop.dims[0];
    ParallelFor(threads, loop.dims[0], [&](int64_t i0, int) {
      const A* a0 = ad + i0 * loop.a_strides[0];
      const B* b0 = bd + i0 * loop.b_strides[0];
      Out* y0 = yd + i0 * inner;
      ForEachRun(sub, [&](int64_t ao, int64_t bo, int64_t yo, int64_t len, int64_t sa, int64_t sb) {
        BinaryRun<A, B, Out>(a0 + ao, b0 + bo, y0 + yo, len, sa, sb, f);
      });
    });
    return;
  }
  ForEachRun(loop, [&](int64_t ao, int64_t bo, int64_t yo, int64_t len, int64_t sa, int64_t sb) {
    BinaryRun<A, B, Out>(ad + ao, bd + bo, yd + yo, len, sa, sb, f);
  });
}

// y = f(c, a, b) with numpy broadcasting over three inputs (Where).
template <typename C, typename A, typename B, typename Out, typename F>
void BroadcastTernary(const Tensor& c, const Tensor& a, const Tensor& b, Tensor& y, F f) {
  const C* cd = c.data<C>();
  const A* ad = a.data<A>();
  const B* bd = b.data<B>();
  Out* yd = y.data<Out>();
  if (y.num_elements() == 0) return;
  const Shape* shapes[] = {&c.shape(), &a.shape(), &b.shape()};
  const MultiLoop loop = MakeMultiLoop(shapes, y.shape());
  ForEachMultiRun(loop, [&](const int64_t* off, int64_t yo, int64_t n, const int64_t* st) {
    const C* __restrict pc = cd + off[0];
    const A* __restrict pa = ad + off[1];
    const B* __restrict pb = bd + off[2];
    Out* __restrict py = yd + yo;
    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
      for (int64_t i = 0; i < n; ++i) py[i] = f(pc[i], pa[i], pb[i]);
    } else {
      const int64_t s0 = st[0], s1 = st[1], s2 = st[2];
      for (int64_t i = 0; i < n; ++i) py[i] = f(pc[i * s0], pa[i * s1], pb[i * s2]);
    }
  });
}

// y = f(...f(f(x0, x1), x2)..., xk) with numpy broadcasting over all inputs,
// accumulated in y one input at a time so every inner loop stays simple.
template <typename T, typename F>
void BroadcastFold(std::span<const Tensor* const> xs, Tensor& y, F f) {
  T* yd = y.data<T>();
  if (y.num_elements() == 0) return;
  SmallVec<const Shape*, 16> shapes;
  for (const Tensor* x : xs) shapes.push_back(&x->shape());
  const MultiLoop loop =
      MakeMultiLoop(std::span<const Shape* const>(shapes.data(), shapes.size()), y.shape());
  ForEachMultiRun(loop, [&](const int64_t* off, int64_t yo, int64_t n, const int64_t* st) {
    T* py = yd + yo;
    const T* p0 = xs[0]->data<T>() + off[0];
    if (st[0] == 1) {
      std::memcpy(py, p0, static_cast<size_t>(n) * sizeof(T));
    } else {
      for (int64_t i = 0; i < n; ++i) py[i] = p0[0];
    }
    for (size_t k = 1; k < xs.size(); ++k) {
      const T* __restrict pk = xs[k]->data<T>() + off[k];
      // py is read and written at the same index only, so no aliasing hazard.
      if (st[k] == 1) {
        for (int64_t i = 0; i < n; ++i) py[i] = f(py[i], pk[i]);
      } else {
        const T v = pk[0];
        for (int64_t i = 0; i < n; ++i) py[i] = f(py[i], v);
      }
    }
  });
}

}  // namespace orrery::ops::cpu
