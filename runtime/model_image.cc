#include "runtime/model_image.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "ops/registry.h"
#include "runtime/model_impl.h"

namespace orrery {
namespace {

constexpr char kMagic[4] = {'O', 'R', 'C', 'G'};
constexpr size_t kHeaderBytes = 16;
// Fused steps keep their original steps one level down; nothing nests
// deeper, so a deeper image is malformed (and recursion stays bounded).
constexpr int kMaxStepDepth = 2;
constexpr size_t kConstantAlign = kTensorAlignment;
// A constant's flags word (version 2): its values are left out, its packed
// form stands in (ModelImageOptions::packed_only).
constexpr uint32_t kConstantPackedOnly = 1u << 0;

enum class AttrKind : uint8_t { kInt, kFloat, kString, kTensor, kInts, kFloats, kStrings };

class Writer {
 public:
  void U8(uint8_t v) { out_.push_back(static_cast<std::byte>(v)); }
  void U32(uint32_t v) {
    for (int i = 0; i < 4; ++i) U8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void U64(uint64_t v) {
    for (int i = 0; i < 8; ++i) U8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void F32(float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    U32(u);
  }
  void Bytes(std::string_view b) {
    U64(b.size());
    const auto* p = reinterpret_cast<const std::byte*>(b.data());
    out_.insert(out_.end(), p, p + b.size());
  }
  // Length, zero padding to a multiple of kConstantAlign from the image's
  // start, the bytes: constants can then be borrowed from an aligned buffer.
  void AlignedBytes(std::string_view b) {
    U64(b.size());
    out_.resize(out_.size() + (kConstantAlign - out_.size() % kConstantAlign) % kConstantAlign, std::byte{0});
    const auto* p = reinterpret_cast<const std::byte*>(b.data());
    out_.insert(out_.end(), p, p + b.size());
  }
  void Ints(const std::vector<int64_t>& v) {
    U64(v.size());
    for (int64_t x : v) I64(x);
  }
  void Slots(const std::vector<int>& v) {
    U64(v.size());
    for (int x : v) U32(static_cast<uint32_t>(x));
  }
  std::vector<std::byte>& out() { return out_; }

 private:
  std::vector<std::byte> out_;
};

Status PutTensor(Writer& w, const Tensor& t, bool aligned = false) {
  if (t.dtype() == DType::kString && t.num_elements() > 0) {
    return Status::Unimplemented("model image: string constants are not stored");
  }
  w.U32(static_cast<uint32_t>(t.dtype()));
  w.Ints(t.shape());
  const std::string_view bytes = t.empty() ? std::string_view() : t.bytes();
  if (aligned) {
    w.AlignedBytes(bytes);
  } else {
    w.Bytes(bytes);
  }
  return Status::Ok();
}

Status PutAttrs(Writer& w, const ops::Attributes& attrs) {
  w.U64(attrs.size());
  for (const auto& [name, value] : attrs.values()) {
    w.Bytes(name);
    w.U8(static_cast<uint8_t>(value.index()));
    if (const auto* i = std::get_if<int64_t>(&value)) {
      w.I64(*i);
    } else if (const auto* f = std::get_if<float>(&value)) {
      w.F32(*f);
    } else if (const auto* s = std::get_if<std::string>(&value)) {
      w.Bytes(*s);
    } else if (const auto* t = std::get_if<Tensor>(&value)) {
      ORRERY_RETURN_IF_ERROR(PutTensor(w, *t));
    } else if (const auto* is = std::get_if<std::vector<int64_t>>(&value)) {
      w.Ints(*is);
    } else if (const auto* fs = std::get_if<std::vector<float>>(&value)) {
      w.U64(fs->size());
      for (float x : *fs) w.F32(x);
    } else if (const auto* ss = std::get_if<std::vector<std::string>>(&value)) {
      w.U64(ss->size());
      for (const std::string& x : *ss) w.Bytes(x);
    }
  }
  return Status::Ok();
}

Status PutStep(Writer& w, const runtime::Step& s) {
  w.Bytes(s.label);
  w.Bytes(s.name);
  w.Bytes(s.op_type);
  w.Slots(s.inputs);
  w.Slots(s.outputs);
  w.Slots(s.release);
  ORRERY_RETURN_IF_ERROR(PutAttrs(w, s.attrs));
  w.U64(s.unfused.size());
  for (const runtime::Step& u : s.unfused) ORRERY_RETURN_IF_ERROR(PutStep(w, u));
  return Status::Ok();
}

void PutSpec(Writer& w, const TensorSpec& s) {
  w.Bytes(s.name);
  w.U32(static_cast<uint32_t>(s.dtype));
  w.U8(s.rank_known ? 1 : 0);
  w.Ints(s.shape);
}

// Bounds-checked reads: every failure is DATA_LOSS naming what was being
// read. A count is checked against the bytes left (each element takes at
// least `min_bytes`) before anything is reserved.
class Reader {
 public:
  explicit Reader(std::span<const std::byte> b) : b_(b) {}

  size_t left() const { return b_.size() - pos_; }
  Status Fail(std::string_view what) const {
    return Status::DataLoss("model image: " + std::string(what) + " truncated or malformed at byte " +
                            std::to_string(pos_));
  }
  Result<uint8_t> U8(std::string_view what) {
    if (left() < 1) return Fail(what);
    return static_cast<uint8_t>(b_[pos_++]);
  }
  Result<uint32_t> U32(std::string_view what) {
    if (left() < 4) return Fail(what);
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(b_[pos_ + i]) << (8 * i);
    pos_ += 4;
    return v;
  }
  Result<uint64_t> U64(std::string_view what) {
    if (left() < 8) return Fail(what);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(b_[pos_ + i]) << (8 * i);
    pos_ += 8;
    return v;
  }
  Result<int64_t> I64(std::string_view what) {
    ORRERY_ASSIGN_OR_RETURN(uint64_t v, U64(what));
    return static_cast<int64_t>(v);
  }
  Result<float> F32(std::string_view what) {
    ORRERY_ASSIGN_OR_RETURN(uint32_t u, U32(what));
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  Result<size_t> Count(std::string_view what, size_t min_bytes) {
    ORRERY_ASSIGN_OR_RETURN(uint64_t n, U64(what));
    if (n > left() / min_bytes) return Fail(what);
    return static_cast<size_t>(n);
  }
  Result<std::string_view> Bytes(std::string_view what) {
    ORRERY_ASSIGN_OR_RETURN(size_t n, Count(what, 1));
    std::string_view v(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return v;
  }
  Result<std::span<const std::byte>> AlignedBytes(std::string_view what) {
    ORRERY_ASSIGN_OR_RETURN(uint64_t n, U64(what));
    const size_t pad = (kConstantAlign - pos_ % kConstantAlign) % kConstantAlign;
    if (pad > left() || n > left() - pad) return Fail(what);
    pos_ += pad;
    std::span<const std::byte> v = b_.subspan(pos_, n);
    pos_ += n;
    return v;
  }
  Result<std::string> String(std::string_view what) {
    ORRERY_ASSIGN_OR_RETURN(std::string_view v, Bytes(what));
    return std::string(v);
  }
  Result<std::vector<int64_t>> Ints(std::string_view what) {
    ORRERY_ASSIGN_OR_RETURN(size_t n, Count(what, 8));
    std::vector<int64_t> v(n);
    for (int64_t& x : v) {
      ORRERY_ASSIGN_OR_RETURN(x, I64(what));
    }
    return v;
  }
  // Slot lists: each entry is -1 (absent) or below num_slots.
  Result<std::vector<int>> Slots(std::string_view what, size_t num_slots) {
    ORRERY_ASSIGN_OR_RETURN(size_t n, Count(what, 4));
    std::vector<int> v(n);
    for (int& x : v) {
      ORRERY_ASSIGN_OR_RETURN(uint32_t u, U32(what));
      x = static_cast<int32_t>(u);
      if (x < -1 || (x >= 0 && static_cast<size_t>(x) >= num_slots)) {
        return Status::DataLoss("model image: " + std::string(what) + " slot " + std::to_string(x) +
                                " out of range (" + std::to_string(num_slots) + " slots)");
      }
    }
    return v;
  }

 private:
  std::span<const std::byte> b_;
  size_t pos_ = 0;
};

Result<DType> GetDType(Reader& r, std::string_view what) {
  ORRERY_ASSIGN_OR_RETURN(uint32_t d, r.U32(what));
  if (d > static_cast<uint32_t>(DType::kUint64)) {
    return Status::DataLoss("model image: " + std::string(what) + " has unknown dtype " +
                            std::to_string(d));
  }
  return static_cast<DType>(d);
}

// `owner` set: an aligned constant (PutTensor aligned), borrowed from the
// image's bytes when they are aligned in memory too.
Result<Tensor> GetTensor(Reader& r, std::string_view what, const std::shared_ptr<const void>* owner = nullptr) {
  ORRERY_ASSIGN_OR_RETURN(DType dtype, GetDType(r, what));
  ORRERY_ASSIGN_OR_RETURN(Shape shape, r.Ints(what));
  std::string_view bytes;
  std::span<const std::byte> span;
  if (owner != nullptr) {
    ORRERY_ASSIGN_OR_RETURN(span, r.AlignedBytes(what));
    bytes = std::string_view(reinterpret_cast<const char*>(span.data()), span.size());
  } else {
    ORRERY_ASSIGN_OR_RETURN(bytes, r.Bytes(what));
  }
  if (dtype == DType::kUndefined) {
    if (!shape.empty() || !bytes.empty()) return r.Fail(what);
    return Tensor();
  }
  // Checks dims and the byte count before FromBytes allocates.
  Result<int64_t> n = CheckedNumElements(shape, dtype);
  if (!n.ok()) return Status::DataLoss("model image: " + std::string(what) + ": " + n.status().message());
  if (dtype == DType::kString && *n > 0) return r.Fail(what);
  // Before anything is allocated: a flipped dim must not cost gigabytes.
  if (static_cast<uint64_t>(*n) * DTypeSize(dtype) != bytes.size()) {
    return Status::DataLoss("model image: " + std::string(what) + " of dims " + std::to_string(*n) +
                            " elements does not match its " + std::to_string(bytes.size()) + " bytes");
  }
  if (owner != nullptr && *owner != nullptr && DTypeSize(dtype) > 0 &&
      static_cast<size_t>(*n) * DTypeSize(dtype) == span.size() &&
      reinterpret_cast<uintptr_t>(span.data()) % kTensorAlignment == 0) {
    Result<Tensor> t = Tensor::Borrow(*owner, span, dtype, std::move(shape));
    if (!t.ok()) return Status::DataLoss("model image: " + std::string(what) + ": " + t.status().message());
    return t;
  }
  Result<Tensor> t = Tensor::FromBytes(dtype, std::move(shape), bytes);
  if (!t.ok()) return Status::DataLoss("model image: " + std::string(what) + ": " + t.status().message());
  return t;
}

// A constant stored without its values: dtype, dims and no bytes; a
// tensor without a buffer (float32, at least one element: what the GEMM
// kernels pack).
Result<Tensor> GetPackedOnlyTensor(Reader& r) {
  ORRERY_ASSIGN_OR_RETURN(DType dtype, GetDType(r, "packed-only constant"));
  ORRERY_ASSIGN_OR_RETURN(Shape shape, r.Ints("packed-only constant"));
  ORRERY_ASSIGN_OR_RETURN(std::span<const std::byte> bytes, r.AlignedBytes("packed-only constant"));
  if (dtype != DType::kFloat32 || !bytes.empty()) return r.Fail("packed-only constant");
  Result<int64_t> n = CheckedNumElements(shape, dtype);
  if (!n.ok()) return Status::DataLoss("model image: packed-only constant: " + n.status().message());
  if (*n == 0) return r.Fail("packed-only constant");
  return Tensor::Unbound(dtype, std::move(shape));
}

Result<ops::Attributes> GetAttrs(Reader& r) {
  ops::Attributes attrs;
  ORRERY_ASSIGN_OR_RETURN(size_t n, r.Count("attribute count", 9));
  for (size_t i = 0; i < n; ++i) {
    ORRERY_ASSIGN_OR_RETURN(std::string name, r.String("attribute name"));
    ORRERY_ASSIGN_OR_RETURN(uint8_t kind, r.U8("attribute kind"));
    switch (static_cast<AttrKind>(kind)) {
      case AttrKind::kInt: {
        ORRERY_ASSIGN_OR_RETURN(int64_t v, r.I64("attribute"));
        attrs.Set(std::move(name), v);
        break;
      }
      case AttrKind::kFloat: {
        ORRERY_ASSIGN_OR_RETURN(float v, r.F32("attribute"));
        attrs.Set(std::move(name), v);
        break;
      }
      case AttrKind::kString: {
        ORRERY_ASSIGN_OR_RETURN(std::string v, r.String("attribute"));
        attrs.Set(std::move(name), std::move(v));
        break;
      }
      case AttrKind::kTensor: {
        ORRERY_ASSIGN_OR_RETURN(Tensor v, GetTensor(r, "tensor attribute"));
        attrs.Set(std::move(name), std::move(v));
        break;
      }
      case AttrKind::kInts: {
        ORRERY_ASSIGN_OR_RETURN(std::vector<int64_t> v, r.Ints("attribute"));
        attrs.Set(std::move(name), std::move(v));
        break;
      }
      case AttrKind::kFloats: {
        ORRERY_ASSIGN_OR_RETURN(size_t m, r.Count("attribute", 4));
        std::vector<float> v(m);
        for (float& x : v) {
      ORRERY_ASSIGN_OR_RETURN(x, r.F32("attribute"));
    }
        attrs.Set(std::move(name), std::move(v));
        break;
      }
      case AttrKind::kStrings: {
        ORRERY_ASSIGN_OR_RETURN(size_t m, r.Count("attribute", 8));
        std::vector<std::string> v(m);
        for (std::string& x : v) {
      ORRERY_ASSIGN_OR_RETURN(x, r.String("attribute"));
    }
        attrs.Set(std::move(name), std::move(v));
        break;
      }
      default:
        return Status::DataLoss("model image: attribute '" + name + "' has unknown kind " +
                                std::to_string(kind));
    }
  }
  return attrs;
}

// Resolves the kernel as runtime/plan.cc's ResolveStep does, from the op
// type: function pointers are never stored.
Status Resolve(runtime::Step& step) {
  const ops::KernelDef* def = ops::OpRegistry::Global().Find(step.op_type, ops::Backend::kCpu);
  if (def == nullptr || def->infer == nullptr || def->compute == nullptr) {
    return Status::DataLoss("model image: op '" + step.op_type + "' has no CPU kernel in this build");
  }
  runtime::BindKernel(*def, step);
  return Status::Ok();
}

Result<runtime::Step> GetStep(Reader& r, size_t num_slots, int depth) {
  runtime::Step s;
  ORRERY_ASSIGN_OR_RETURN(s.label, r.String("step label"));
  ORRERY_ASSIGN_OR_RETURN(s.name, r.String("step name"));
  ORRERY_ASSIGN_OR_RETURN(s.op_type, r.String("step op type"));
  ORRERY_ASSIGN_OR_RETURN(s.inputs, r.Slots("step inputs", num_slots));
  ORRERY_ASSIGN_OR_RETURN(s.outputs, r.Slots("step outputs", num_slots));
  ORRERY_ASSIGN_OR_RETURN(s.release, r.Slots("step release", num_slots));
  ORRERY_ASSIGN_OR_RETURN(s.attrs, GetAttrs(r));
  ORRERY_ASSIGN_OR_RETURN(size_t n, r.Count("unfused steps", 8 * 6));
  if (n > 0 && depth + 1 >= kMaxStepDepth) {
    return Status::DataLoss("model image: " + s.label + ": unfused steps nested too deep");
  }
  for (size_t i = 0; i < n; ++i) {
    ORRERY_ASSIGN_OR_RETURN(runtime::Step u, GetStep(r, num_slots, depth + 1));
    s.unfused.push_back(std::move(u));
  }
  ORRERY_RETURN_IF_ERROR(Resolve(s));
  return s;
}

Result<TensorSpec> GetSpec(Reader& r) {
  TensorSpec s;
  ORRERY_ASSIGN_OR_RETURN(s.name, r.String("signature name"));
  ORRERY_ASSIGN_OR_RETURN(s.dtype, GetDType(r, "signature dtype"));
  ORRERY_ASSIGN_OR_RETURN(uint8_t rank_known, r.U8("signature rank"));
  if (rank_known > 1) return r.Fail("signature rank");
  s.rank_known = rank_known == 1;
  ORRERY_ASSIGN_OR_RETURN(s.shape, r.Ints("signature shape"));
  for (int64_t d : s.shape) {
    if (d < -1) return r.Fail("signature shape");
  }
  return s;
}

Result<std::vector<TensorSpec>> GetSpecs(Reader& r) {
  ORRERY_ASSIGN_OR_RETURN(size_t n, r.Count("signature", 21));
  std::vector<TensorSpec> specs;
  for (size_t i = 0; i < n; ++i) {
    ORRERY_ASSIGN_OR_RETURN(TensorSpec s, GetSpec(r));
    specs.push_back(std::move(s));
  }
  return specs;
}

// Every value a step reads must exist when it runs: a graph input, a
// constant or the output of an earlier step (unfused originals may also
// read what their fused step's own earlier originals produce). Outputs are
// produced once. The executors rely on this, as on CompilePlan's output.
Status CheckDataflow(const runtime::Plan& plan, size_t num_inputs) {
  std::vector<char> defined(plan.num_slots, 0);
  for (int s : plan.input_slots) defined[static_cast<size_t>(s)] = 1;
  for (const auto& [slot, t] : plan.constants) {
    if (defined[static_cast<size_t>(slot)]) {
      return Status::DataLoss("model image: slot " + std::to_string(slot) + " defined twice");
    }
    defined[static_cast<size_t>(slot)] = 1;
  }
  if (plan.input_slots.size() != num_inputs) {
    return Status::DataLoss("model image: input slots do not match the signature");
  }
  for (const runtime::Step& step : plan.steps) {
    for (int in : step.inputs) {
      if (in >= 0 && !defined[static_cast<size_t>(in)]) {
        return Status::DataLoss("model image: " + step.label + " reads slot " + std::to_string(in) +
                                " before it is produced");
      }
    }
    std::vector<char> local = defined;
    for (const runtime::Step& u : step.unfused) {
      for (int in : u.inputs) {
        if (in >= 0 && !local[static_cast<size_t>(in)]) {
          return Status::DataLoss("model image: " + u.label + " reads slot " + std::to_string(in) +
                                  " before it is produced");
        }
      }
      for (int out : u.outputs) {
        if (out >= 0) local[static_cast<size_t>(out)] = 1;
      }
    }
    for (int out : step.outputs) {
      if (out < 0) continue;
      if (defined[static_cast<size_t>(out)]) {
        return Status::DataLoss("model image: " + step.label + " writes slot " + std::to_string(out) +
                                " twice");
      }
      defined[static_cast<size_t>(out)] = 1;
    }
  }
  for (int out : plan.output_slots) {
    if (!defined[static_cast<size_t>(out)]) {
      return Status::DataLoss("model image: graph output slot " + std::to_string(out) +
                              " is never produced");
    }
  }
  return Status::Ok();
}

// Per slot: whether it may be held packed only. Every step that reads it
// reads it as an input whose packed form its node cache holds
// (ops::KernelDef::packed_input), no unfused original step reads it (they
// would pack it from its values) and it is no graph output.
std::vector<char> PackedOnlyReadable(const runtime::Plan& plan) {
  std::vector<char> ok(plan.num_slots, 1);
  for (int s : plan.output_slots) ok[static_cast<size_t>(s)] = 0;
  for (const runtime::Step& step : plan.steps) {
    std::vector<uint32_t> keys;
    if (step.node_cache != nullptr && step.packed_input != nullptr) {
      for (const auto& [key, value] : step.node_cache->Snapshot()) keys.push_back(key);
    }
    for (size_t j = 0; j < step.inputs.size(); ++j) {
      const int s = step.inputs[j];
      if (s < 0) continue;
      const bool packed = std::any_of(keys.begin(), keys.end(), [&](uint32_t key) {
        return step.packed_input(key) == static_cast<int>(j);
      });
      if (!packed) ok[static_cast<size_t>(s)] = 0;
    }
    for (const runtime::Step& u : step.unfused) {
      for (int s : u.inputs) {
        if (s >= 0) ok[static_cast<size_t>(s)] = 0;
      }
    }
  }
  return ok;
}

// Static inputs but for their first (batch) dim: every plan of the model
// packs its weights in the layouts the exported one did.
bool StaticButFirstDim(const ModelSignature& sig) {
  return std::all_of(sig.inputs.begin(), sig.inputs.end(), [](const TensorSpec& s) {
    return std::all_of(s.shape.begin() + (s.shape.empty() ? 0 : 1), s.shape.end(), [](int64_t d) { return d >= 0; });
  });
}

}  // namespace

Result<std::vector<std::byte>> ExportModelImage(const CompiledModel& model, const ModelImageOptions& options) {
  const CompiledModel::Impl& impl = *model.impl_;
  const runtime::Plan& plan = *impl.plan;
  const ModelSignature& sig = impl.signature;
  // Which constants are stored without their values: a model loaded from a
  // packed-only image has none for them (Load checked that their packed
  // forms stand in); others when asked and allowed.
  std::vector<char> eligible;
  if (options.packed_only && StaticButFirstDim(sig)) eligible = PackedOnlyReadable(plan);
  std::vector<char> packed_only(plan.constants.size(), 0);
  for (size_t i = 0; i < plan.constants.size(); ++i) {
    const auto& [slot, t] = plan.constants[i];
    packed_only[i] = t.unbound() || (!eligible.empty() && eligible[static_cast<size_t>(slot)] &&
                                         t.dtype() == DType::kFloat32 && t.num_elements() > 0);
  }
  // Version 1 (no flags words) when nothing is packed only: what earlier
  // builds read.
  const bool flags = std::find(packed_only.begin(), packed_only.end(), 1) != packed_only.end();
  Writer w;
  const auto* magic = reinterpret_cast<const std::byte*>(kMagic);
  w.out().assign(magic, magic + 4);
  w.U32(flags ? kModelImageVersion : kModelImageMinVersion);
  w.U32(ops::kCachedStateVersion);
  w.U32(0);
  // Signature.
  w.I64(sig.opset);
  w.U64(sig.node_count);
  w.U64(sig.inputs.size());
  for (const TensorSpec& s : sig.inputs) PutSpec(w, s);
  w.U64(sig.outputs.size());
  for (const TensorSpec& s : sig.outputs) PutSpec(w, s);
  // Plan.
  w.I64(plan.opset);
  w.U64(plan.num_slots);
  w.U64(plan.slot_names.size());
  for (const std::string& n : plan.slot_names) w.Bytes(n);
  w.U64(plan.constants.size());
  for (size_t i = 0; i < plan.constants.size(); ++i) {
    const auto& [slot, t] = plan.constants[i];
    w.U32(static_cast<uint32_t>(slot));
    if (packed_only[i]) {
      w.U32(kConstantPackedOnly);
      w.U32(static_cast<uint32_t>(t.dtype()));
      w.Ints(t.shape());
      w.AlignedBytes({});
      continue;
    }
    if (flags) w.U32(0);
    ORRERY_RETURN_IF_ERROR(PutTensor(w, t, /*aligned=*/true));
  }
  w.Slots(plan.input_slots);
  w.Slots(plan.output_slots);
  w.U64(plan.steps.size());
  for (const runtime::Step& s : plan.steps) ORRERY_RETURN_IF_ERROR(PutStep(w, s));
  w.U64(plan.folded_nodes);
  w.U64(plan.removed_nodes);
  w.U64(plan.fusion.batchnorms_folded);
  w.U64(plan.fusion.biases);
  w.U64(plan.fusion.residuals);
  w.U64(plan.fusion.activations);
  return std::move(w.out());
}

namespace runtime {

Result<DecodedImage> DecodeModelImage(std::span<const std::byte> image,
                                      std::shared_ptr<const void> owner) {
  if (image.size() < kHeaderBytes || std::memcmp(image.data(), kMagic, 4) != 0) {
    return Status::DataLoss("model image: missing ORCG header");
  }
  Reader r(image);
  (void)r.U32("magic");
  ORRERY_ASSIGN_OR_RETURN(uint32_t version, r.U32("version"));
  ORRERY_ASSIGN_OR_RETURN(uint32_t state_version, r.U32("state version"));
  if (version < kModelImageMinVersion || version > kModelImageVersion ||
      state_version != ops::kCachedStateVersion) {
    return Status::FailedPrecondition(
        "model image: version " + std::to_string(version) + "/" + std::to_string(state_version) +
        ", this build reads " + std::to_string(kModelImageMinVersion) + "-" + std::to_string(kModelImageVersion) +
        "/" + std::to_string(ops::kCachedStateVersion));
  }
  const bool has_flags = version >= 2;
  (void)r.U32("reserved");

  DecodedImage out;
  ModelSignature& sig = out.signature;
  ORRERY_ASSIGN_OR_RETURN(sig.opset, r.I64("opset"));
  ORRERY_ASSIGN_OR_RETURN(uint64_t node_count, r.U64("node count"));
  sig.node_count = static_cast<size_t>(node_count);
  ORRERY_ASSIGN_OR_RETURN(sig.inputs, GetSpecs(r));
  ORRERY_ASSIGN_OR_RETURN(sig.outputs, GetSpecs(r));

  Plan& plan = out.plan;
  ORRERY_ASSIGN_OR_RETURN(plan.opset, r.I64("plan opset"));
  if (plan.opset != sig.opset) return r.Fail("plan opset");
  // A slot holds at least one name byte count (8 bytes) in slot_names.
  ORRERY_ASSIGN_OR_RETURN(uint64_t num_slots, r.U64("slot count"));
  ORRERY_ASSIGN_OR_RETURN(size_t names, r.Count("slot names", 8));
  if (names != num_slots) return r.Fail("slot names");
  plan.num_slots = names;
  plan.slot_names.reserve(names);
  for (size_t i = 0; i < names; ++i) {
    ORRERY_ASSIGN_OR_RETURN(std::string n, r.String("slot name"));
    plan.slot_names.push_back(std::move(n));
  }
  ORRERY_ASSIGN_OR_RETURN(size_t constants, r.Count("constants", 4 + (has_flags ? 4 : 0) + 4 + 8 + 8));
  for (size_t i = 0; i < constants; ++i) {
    ORRERY_ASSIGN_OR_RETURN(uint32_t slot, r.U32("constant slot"));
    if (slot >= plan.num_slots) return r.Fail("constant slot");
    uint32_t flags = 0;
    if (has_flags) {
      ORRERY_ASSIGN_OR_RETURN(flags, r.U32("constant flags"));
    }
    if ((flags & ~kConstantPackedOnly) != 0) return r.Fail("constant flags");
    if ((flags & kConstantPackedOnly) != 0) {
      ORRERY_ASSIGN_OR_RETURN(Tensor t, GetPackedOnlyTensor(r));
      plan.constants.emplace_back(static_cast<int>(slot), std::move(t));
      continue;
    }
    ORRERY_ASSIGN_OR_RETURN(Tensor t, GetTensor(r, "constant", &owner));
    plan.constants.emplace_back(static_cast<int>(slot), std::move(t));
  }
  ORRERY_ASSIGN_OR_RETURN(plan.input_slots, r.Slots("input slots", plan.num_slots));
  ORRERY_ASSIGN_OR_RETURN(plan.output_slots, r.Slots("output slots", plan.num_slots));
  for (int s : plan.input_slots) {
    if (s < 0) return r.Fail("input slots");
  }
  for (int s : plan.output_slots) {
    if (s < 0) return r.Fail("output slots");
  }
  if (plan.output_slots.size() != sig.outputs.size()) return r.Fail("output slots");
  ORRERY_ASSIGN_OR_RETURN(size_t steps, r.Count("steps", 8 * 6));
  plan.steps.reserve(steps);
  for (size_t i = 0; i < steps; ++i) {
    ORRERY_ASSIGN_OR_RETURN(Step s, GetStep(r, plan.num_slots, 0));
    plan.steps.push_back(std::move(s));
  }
  ORRERY_ASSIGN_OR_RETURN(uint64_t folded, r.U64("plan stats"));
  ORRERY_ASSIGN_OR_RETURN(uint64_t removed, r.U64("plan stats"));
  plan.folded_nodes = static_cast<size_t>(folded);
  plan.removed_nodes = static_cast<size_t>(removed);
  ORRERY_ASSIGN_OR_RETURN(uint64_t bn, r.U64("fusion stats"));
  ORRERY_ASSIGN_OR_RETURN(uint64_t biases, r.U64("fusion stats"));
  ORRERY_ASSIGN_OR_RETURN(uint64_t residuals, r.U64("fusion stats"));
  ORRERY_ASSIGN_OR_RETURN(uint64_t activations, r.U64("fusion stats"));
  plan.fusion = FusionStats{.batchnorms_folded = static_cast<size_t>(bn),
                            .biases = static_cast<size_t>(biases),
                            .residuals = static_cast<size_t>(residuals),
                            .activations = static_cast<size_t>(activations)};
  if (r.left() != 0) return Status::DataLoss("model image: trailing bytes");
  ORRERY_RETURN_IF_ERROR(CheckDataflow(plan, sig.inputs.size()));
  return out;
}

bool HasPackedOnlyConstants(const Plan& plan) {
  return std::any_of(plan.constants.begin(), plan.constants.end(),
                     [](const auto& c) { return c.second.unbound(); });
}

bool ImageHasPackedOnlyConstants(std::span<const std::byte> image) {
  if (image.size() < 8 || std::memcmp(image.data(), kMagic, 4) != 0) return false;
  Reader r(image);
  (void)r.U32("magic");
  const Result<uint32_t> version = r.U32("version");
  // A version after 2 must say again when it is written.
  static_assert(kModelImageVersion == 2, "ImageHasPackedOnlyConstants reads version 2's meaning");
  return version.ok() && *version == 2;
}

Status CheckPackedOnlyConstants(const Plan& plan) {
  if (!HasPackedOnlyConstants(plan)) return Status::Ok();
  const std::vector<char> ok = PackedOnlyReadable(plan);
  for (const auto& [slot, t] : plan.constants) {
    if (!t.unbound() || ok[static_cast<size_t>(slot)]) continue;
    return Status::DataLoss("model image: constant '" + plan.slot_names[static_cast<size_t>(slot)] +
                            "' (slot " + std::to_string(slot) +
                            ") is stored packed only, but not every step reading it has its packed form");
  }
  return Status::Ok();
}

}  // namespace runtime
}  // namespace orrery
