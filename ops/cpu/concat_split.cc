// Concat and Split along one axis, for any dtype: both view the tensors as
// [outer, axis * inner] and move contiguous row chunks with memcpy.
#include <cstring>
#include <memory>
#include <string>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/data_movement.h"
#include "ops/cpu/prepared.h"
#include "ops/kernel_util.h"

namespace orrery::ops::cpu {
namespace {

// ---- Concat ----

Result<int64_t> ConcatAxis(const Attributes& attrs, int64_t opset, size_t rank) {
  if (!attrs.Has("axis") && opset >= 4) {
    return Status::InvalidArgument("Concat: axis is required");
  }
  ORRERY_ASSIGN_OR_RETURN(int64_t axis, attrs.GetInt("axis", 1));
  Result<int64_t> a = NormalizeAxis(axis, static_cast<int64_t>(rank));
  if (!a.ok()) return a.status().WithPrefix("Concat");
  return *a;
}

Status InferConcat(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const TensorType& first = ctx.inputs[0];
  ORRERY_RETURN_IF_ERROR(RequireMovable(first, "Concat", "input 0"));
  const size_t rank = first.shape.size();
  ORRERY_ASSIGN_OR_RETURN(int64_t axis, ConcatAxis(ctx.attrs, ctx.opset, rank));
  Shape out = first.shape;
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    const TensorType& t = ctx.inputs[i];
    if (!t.present())
      return Status::InvalidArgument("Concat: input " + std::to_string(i) + " is missing");
    if (t.dtype != first.dtype) {
      return Status::InvalidArgument(
          "Concat: inputs have different dtypes: " + std::string(DTypeName(first.dtype)) + " and " +
          std::string(DTypeName(t.dtype)));
    }
    bool match = t.shape.size() == rank;
    for (size_t d = 0; match && d < rank; ++d) {
      match = static_cast<int64_t>(d) == axis || t.shape[d] == first.shape[d];
    }
    if (!match) {
      return Status::InvalidArgument("Concat: input shapes " + ShapeToString(first.shape) +
                                     " and " + ShapeToString(t.shape) + " differ off axis " +
                                     std::to_string(axis));
    }
    int64_t& d = out[static_cast<size_t>(axis)];
    if (__builtin_add_overflow(d, t.shape[static_cast<size_t>(axis)], &d)) {
      return Status::InvalidArgument("Concat: output dim overflows");
    }
  }
  outputs->assign(1, TensorType{first.dtype, std::move(out)});
  return Status::Ok();
}

Status ComputeConcat(const KernelContext& ctx, std::span<Tensor> outputs) {
  Tensor& y = outputs[0];
  const size_t rank = y.shape().size();
  ORRERY_ASSIGN_OR_RETURN(int64_t axis, ConcatAxis(ctx.attrs, ctx.opset, rank));
  const size_t elem = DTypeSize(y.dtype());
  const int64_t outer = DimProduct(y.shape(), 0, static_cast<size_t>(axis));
  const int64_t inner = DimProduct(y.shape(), static_cast<size_t>(axis) + 1, rank);
  const int64_t out_row = y.shape()[static_cast<size_t>(axis)] * inner;
  auto* dst = static_cast<uint8_t*>(y.raw_data());
  int64_t col = 0;  // element offset of this input's chunk within an output row
  for (const Tensor* t : ctx.inputs) {
    const int64_t row = t->shape()[static_cast<size_t>(axis)] * inner;
    const auto* src = static_cast<const uint8_t*>(t->raw_data());
    if (row > 0) {
      for (int64_t o = 0; o < outer; ++o) {
        std::memcpy(dst + (o * out_row + col) * static_cast<int64_t>(elem),
                    src + o * row * static_cast<int64_t>(elem), static_cast<size_t>(row) * elem);
      }
    }
    col += row;
  }
  return Status::Ok();
}

// ---- Split ----

// Chunk lengths along `axis` (dim long) for `n_out` outputs. `split` is the
// explicit list when given (attribute before opset 13, input from 13).
Result<std::vector<int64_t>> SplitSizes(const Attributes& attrs, int64_t opset, int64_t dim,
                                        size_t n_out, const std::vector<int64_t>* split) {
  if (split != nullptr) {
    if (n_out != 0 && split->size() != n_out) {
      return Status::InvalidArgument("Split: split has " + std::to_string(split->size()) +
                                     " entries for " + std::to_string(n_out) + " outputs");
    }
    int64_t sum = 0;
    for (int64_t s : *split) {
      if (s < 0 || __builtin_add_overflow(sum, s, &sum)) {
        return Status::InvalidArgument("Split: invalid split size " + std::to_string(s));
      }
    }
    if (sum != dim) {
      return Status::InvalidArgument("Split: split sizes sum to " + std::to_string(sum) +
                                     ", the axis has " + std::to_string(dim));
    }
    return *split;
  }
  if (attrs.Has("num_outputs")) {
    ORRERY_ASSIGN_OR_RETURN(int64_t num, attrs.GetInt("num_outputs", 0));
    if (num <= 0 || (n_out != 0 && static_cast<size_t>(num) != n_out)) {
      return Status::InvalidArgument("Split: num_outputs " + std::to_string(num) +
                                     " does not match the node's outputs");
    }
    n_out = static_cast<size_t>(num);
  }
  if (n_out == 0) return Status::InvalidArgument("Split: the number of outputs is unknown");
  const int64_t n = static_cast<int64_t>(n_out);
  if (opset < 18 && dim % n != 0) {
    return Status::InvalidArgument("Split: axis of length " + std::to_string(dim) +
                                   " does not split evenly into " + std::to_string(n) + " outputs");
  }
  // Opset 18: ceil-sized chunks, the last one smaller.
  const int64_t chunk = dim / n + (dim % n != 0 ? 1 : 0);
  std::vector<int64_t> sizes(n_out, chunk);
  const int64_t last = dim - chunk * (n - 1);
  if (last < 0) {
    return Status::InvalidArgument("Split: axis of length " + std::to_string(dim) +
                                   " cannot be split into " + std::to_string(n) + " outputs");
  }
  sizes.back() = last;
  return sizes;
}

// Reads the split list; *unknown when input 1 exists without a known value.
Result<std::vector<int64_t>> SplitFor(const Attributes& attrs, int64_t opset, const Shape& in,
                                      size_t n_out, const Tensor* split_input, bool split_present,
                                      bool* unknown, int64_t* axis_out) {
  *unknown = false;
  ORRERY_ASSIGN_OR_RETURN(int64_t axis_attr, attrs.GetInt("axis", 0));
  Result<int64_t> axis = NormalizeAxis(axis_attr, static_cast<int64_t>(in.size()));
  if (!axis.ok()) return axis.status().WithPrefix("Split");
  *axis_out = *axis;
  const int64_t dim = in[static_cast<size_t>(*axis)];
  if (opset < 13) {
    if (attrs.Has("split")) {
      ORRERY_ASSIGN_OR_RETURN(std::vector<int64_t> split, attrs.GetInts("split"));
      return SplitSizes(attrs, opset, dim, n_out, &split);
    }
    return SplitSizes(attrs, opset, dim, n_out, nullptr);
  }
  if (split_present) {
    if (split_input == nullptr) {
      *unknown = true;
      return std::vector<int64_t>{};
    }
    if (split_input->dtype() != DType::kInt64) {
      return Status::InvalidArgument("Split: split must be int64");
    }
    ORRERY_ASSIGN_OR_RETURN(std::vector<int64_t> split, ReadInts(*split_input, "Split", "split"));
    return SplitSizes(attrs, opset, dim, n_out, &split);
  }
  return SplitSizes(attrs, opset, dim, n_out, nullptr);
}

Status InferSplit(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const TensorType& x = ctx.inputs[0];
  ORRERY_RETURN_IF_ERROR(RequireMovable(x, "Split", "input"));
  bool unknown = false;
  int64_t axis = 0;
  ORRERY_ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                          SplitFor(ctx.attrs, ctx.opset, x.shape, ctx.num_outputs, ctx.value(1),
                                   OptionalInput(ctx, 1) != nullptr, &unknown, &axis));
  if (unknown) return Status::Unavailable("Split needs the value of its split input");
  outputs->clear();
  for (int64_t s : sizes) {
    Shape out = x.shape;
    out[static_cast<size_t>(axis)] = s;
    outputs->push_back(TensorType{x.dtype, std::move(out)});
  }
  return Status::Ok();
}

// Sizes and axis when the split input is absent or constant; otherwise
// they are read per call.
struct PreparedSplit : PreparedKernel {
  bool constant = false;
  std::vector<int64_t> sizes;
  int64_t axis = 0;
};

Result<Prepared> PrepareSplit(const PrepareContext& ctx) {
  auto p = std::make_shared<PreparedSplit>();
  const bool present = ctx.inputs.size() > 1 && ctx.inputs[1].present();
  bool unknown = false;
  ORRERY_ASSIGN_OR_RETURN(p->sizes, SplitFor(ctx.attrs, ctx.opset, ctx.inputs[0].shape,
                                             ctx.outputs.size(), ctx.value(1), present, &unknown,
                                             &p->axis));
  p->constant = !unknown;
  return Prepared{.kernel = std::move(p)};
}

Status ComputeSplit(const KernelContext& ctx, std::span<Tensor> outputs) {
  if (ctx.prepared == nullptr) return ComputeUnprepared(PrepareSplit, ComputeSplit, ctx, outputs);
  const auto& prepared = *static_cast<const PreparedSplit*>(ctx.prepared);
  const Tensor& x = *ctx.inputs[0];
  std::span<const int64_t> sizes = prepared.sizes;
  int64_t axis = prepared.axis;
  std::vector<int64_t> computed;
  if (!prepared.constant) {
    const Tensor* split = OptionalInput(ctx, 1);
    bool unknown = false;
    ORRERY_ASSIGN_OR_RETURN(computed, SplitFor(ctx.attrs, ctx.opset, x.shape(), outputs.size(),
                                               split, split != nullptr, &unknown, &axis));
    sizes = computed;
  }
  if (sizes.size() != outputs.size()) return Status::Internal("Split: output count changed");
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Shape& got = outputs[k].shape();
    bool same = got.size() == x.shape().size();
    for (size_t d = 0; same && d < got.size(); ++d) {
      same = got[d] == (d == static_cast<size_t>(axis) ? sizes[k] : x.shape()[d]);
    }
    if (!same) {
      Shape want = x.shape();
      want[static_cast<size_t>(axis)] = sizes[k];
      ORRERY_RETURN_IF_ERROR(CheckOutputShape(outputs[k], want, "Split"));
    }
  }
  const size_t rank = x.shape().size();
  const size_t elem = DTypeSize(x.dtype());
  const int64_t outer = DimProduct(x.shape(), 0, static_cast<size_t>(axis));
  const int64_t inner = DimProduct(x.shape(), static_cast<size_t>(axis) + 1, rank);
  const int64_t in_row = x.shape()[static_cast<size_t>(axis)] * inner;
  const auto* src = static_cast<const uint8_t*>(x.raw_data());
  int64_t col = 0;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const int64_t row = sizes[k] * inner;
    const int64_t dims[2] = {outer, row};
    const int64_t strides[2] = {in_row, 1};
    if (row > 0 && outer > 0) {
      StridedCopy(src + col * static_cast<int64_t>(elem), dims, strides, elem,
                  outputs[k].raw_data(), ctx.threads);
    }
    col += row;
  }
  return Status::Ok();
}

}  // namespace

Status RegisterConcatSplitKernels(OpRegistry* registry) {
  ORRERY_RETURN_IF_ERROR(registry->Register(KernelDef{.op_type = "Concat",
                                                      .backend = Backend::kCpu,
                                                      .min_inputs = 1,
                                                      .max_inputs = 1 << 16,
                                                      .infer = InferConcat,
                                                      .compute = ComputeConcat,
                                                      .overwrites_outputs = true}));
  ORRERY_RETURN_IF_ERROR(registry->Register(KernelDef{.op_type = "Split",
                                                      .backend = Backend::kCpu,
                                                      .min_inputs = 1,
                                                      .max_inputs = 2,
                                                      .min_outputs = 1,
                                                      .max_outputs = 1 << 16,
                                                      .infer = InferSplit,
                                                      .compute = ComputeSplit,
                                                      .prepare = PrepareSplit,
                                                      .overwrites_outputs = true}));
  return Status::Ok();
}

}  // namespace orrery::ops::cpu
