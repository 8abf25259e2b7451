#include "runtime/specialize.h"

#include <algorithm>
#include <string_view>

#include "runtime/fold.h"
#include "runtime/row_split.h"
#include "runtime/run_state.h"

namespace orrery::runtime {
namespace {

// Ops whose (single) output is their first input's bytes with another shape.
// With a known type they need no step: the output aliases the input.
bool IsViewOp(const Step& step) {
  static constexpr std::string_view kOps[] = {"Reshape", "Flatten", "Identity", "Squeeze",
                                              "Unsqueeze"};
  return step.alloc == ops::OutputAlloc::kByKernel && step.outputs.size() == 1 &&
         std::find(std::begin(kOps), std::end(kOps), step.op_type) != std::end(kOps);
}

bool IsInteger(DType d) {
  switch (d) {
    case DType::kInt8:
    case DType::kUint8:
    case DType::kInt16:
    case DType::kUint16:
    case DType::kInt32:
    case DType::kUint32:
    case DType::kInt64:
    case DType::kUint64:
      return true;
    default:
      return false;
  }
}

int64_t Bytes(const ops::TensorType& t) {
  return NumElements(t.shape) * static_cast<int64_t>(DTypeSize(t.dtype));
}

class Builder {
 public:
  explicit Builder(SpecializedPlan* sp) : sp_(sp), base_(*sp->base) {}

  Status Build() {
    slot_entry_.assign(base_.num_slots, -1);
    for (const auto& [slot, t] : base_.constants) {
      slot_entry_[static_cast<size_t>(slot)] = AddConstant(t, slot);
    }
    for (size_t i = 0; i < base_.input_slots.size(); ++i) {
      Entry e;
      e.kind = EntryKind::kInput;
      e.typed = true;
      e.type = sp_->input_types[i];
      e.index = static_cast<int>(i);
      e.slot = base_.input_slots[i];
      const int id = Add(std::move(e));
      slot_entry_[static_cast<size_t>(base_.input_slots[i])] = id;
      sp_->input_entries.push_back(id);
    }
    for (const Step& step : base_.steps) ORRERY_RETURN_IF_ERROR(VisitFusedOrNot(step));
    for (int slot : base_.output_slots) {
      const int e = slot_entry_[static_cast<size_t>(slot)];
      if (e < 0) {
        return Status::Internal("graph output '" + base_.slot_names[static_cast<size_t>(slot)] +
                                "' is never produced");
      }
      sp_->output_entries.push_back(e);
      sp_->output_names.push_back(base_.slot_names[static_cast<size_t>(slot)]);
    }
    ClassifyEntries();
    AliasConcats();
    PlanLifetimes();
    FillStats();
    return Status::Ok();
  }

 private:
  int Add(Entry e) {
    sp_->entries.push_back(std::move(e));
    return static_cast<int>(sp_->entries.size() - 1);
  }

  int AddConstant(const Tensor& t, int slot) {
    Entry e;
    e.kind = EntryKind::kConstant;
    e.typed = true;
    e.type = ops::TensorType{t.dtype(), t.shape()};
    e.index = static_cast<int>(sp_->constants.size());
    e.slot = slot;
    sp_->constants.push_back(t);
    return Add(std::move(e));
  }

  const Entry& At(int e) const { return sp_->entries[static_cast<size_t>(e)]; }

  // A fused step with a fallback runs fused only when its inference accepts
  // these types (the residual has the output's shape); else its original
  // steps run.
  Status VisitFusedOrNot(const Step& step) {
    if (step.unfused.empty()) return Visit(step);
    if (FusedApplies(step)) return Visit(step);
    for (const Step& u : step.unfused) ORRERY_RETURN_IF_ERROR(Visit(u));
    return Status::Ok();
  }

  bool FusedApplies(const Step& step) {
    std::vector<ops::TensorType> types;
    std::vector<const Tensor*> values;
    for (int slot : step.inputs) {
      if (slot < 0) {
        types.emplace_back();
        values.push_back(nullptr);
        continue;
      }
      const int e = slot_entry_[static_cast<size_t>(slot)];
      if (e < 0 || !At(e).typed) return false;
      types.push_back(At(e).type);
      values.push_back(At(e).kind == EntryKind::kConstant
                           ? &sp_->constants[static_cast<size_t>(At(e).index)]
                           : nullptr);
    }
    std::vector<ops::TensorType> out;
    if (!InferStep(step, base_.opset, types, values, &out).ok() || out.size() != 1) return false;
    // The residual (last input) must be exactly output-shaped.
    return !step.attrs.Has("_fused_residual") || types.back() == out[0];
  }

  Status Visit(const Step& step) {
    in_entries_.clear();
    in_types_.clear();
    in_values_.clear();
    bool typed = true;
    for (int slot : step.inputs) {
      if (slot < 0) {
        in_entries_.push_back(-1);
        in_types_.emplace_back();
        in_values_.push_back(nullptr);
        continue;
      }
      const int e = slot_entry_[static_cast<size_t>(slot)];
      if (e < 0) {
        return Status::Internal(step.label + ": input '" +
                                base_.slot_names[static_cast<size_t>(slot)] + "' has no producer");
      }
      in_entries_.push_back(e);
      typed = typed && At(e).typed;
      in_types_.push_back(At(e).type);
      in_values_.push_back(At(e).kind == EntryKind::kConstant
                               ? &sp_->constants[static_cast<size_t>(At(e).index)]
                               : nullptr);
    }
    bool dynamic = !typed;
    if (typed) {
      Status st = InferStep(step, base_.opset, in_types_, in_values_, &out_types_);
      if (st.code() == StatusCode::kUnavailable) {
        dynamic = true;
      } else {
        ORRERY_RETURN_IF_ERROR(st);
      }
    }
    if (!dynamic) {
      std::vector<Tensor> folded;
      if (TryFold(step, base_.opset, in_types_, in_values_, out_types_, &fold_budget_, &folded)) {
        for (size_t o = 0; o < step.outputs.size(); ++o) {
          if (step.outputs[o] >= 0) {
            slot_entry_[static_cast<size_t>(step.outputs[o])] =
                AddConstant(folded[o], step.outputs[o]);
          }
        }
        ++folded_;
        return Status::Ok();
      }
      if (IsViewOp(step) && in_entries_[0] >= 0 && step.outputs[0] >= 0) {
        const int root = RootOf(*sp_, in_entries_[0]);
        const EntryKind k = At(root).kind;
        if ((k == EntryKind::kConstant || k == EntryKind::kInput || k == EntryKind::kArena) &&
            Bytes(At(root).type) == Bytes(out_types_[0])) {
          Entry e;
          e.kind = EntryKind::kView;
          e.typed = true;
          e.type = out_types_[0];
          e.index = root;
          e.slot = step.outputs[0];
          slot_entry_[static_cast<size_t>(step.outputs[0])] = Add(std::move(e));
          ++views_;
          return Status::Ok();
        }
      }
    }

    PlannedStep ps;
    ps.step = &step;
    ps.dynamic = dynamic;
    ps.in_begin = static_cast<uint32_t>(sp_->step_inputs.size());
    ps.in_count = static_cast<uint32_t>(in_entries_.size());
    sp_->step_inputs.insert(sp_->step_inputs.end(), in_entries_.begin(), in_entries_.end());
    ps.out_begin = static_cast<uint32_t>(sp_->entries.size());
    ps.out_count = static_cast<uint32_t>(step.outputs.size());
    for (size_t o = 0; o < step.outputs.size(); ++o) {
      Entry e;
      e.kind = !dynamic && step.alloc == ops::OutputAlloc::kPreallocated ? EntryKind::kArena
                                                                        : EntryKind::kKernel;
      e.typed = !dynamic;
      if (!dynamic) e.type = out_types_[o];
      e.slot = step.outputs[o];
      const int id = Add(std::move(e));
      if (step.outputs[o] >= 0) slot_entry_[static_cast<size_t>(step.outputs[o])] = id;
    }
    if (!dynamic) {
      for (int e : in_entries_) {
        if (!step.values_checked_in_compute && e >= 0 &&
            At(RootOf(*sp_, e)).kind != EntryKind::kConstant && IsInteger(At(e).type.dtype)) {
          ps.recheck = true;
        }
      }
      ps.cost = StepCost(step, in_types_, out_types_);
      if (step.prepare != nullptr) {
        ops::PrepareContext pctx{.inputs = in_types_,
                                 .values = in_values_,
                                 .outputs = out_types_,
                                 .attrs = step.attrs,
                                 .opset = base_.opset,
                                 .node_cache = step.node_cache.get()};
        Result<ops::Prepared> prepared = step.prepare(pctx);
        if (!prepared.ok()) return prepared.status().WithPrefix(step.label);
        ps.prepared = std::move(prepared).value();
        sp_->scratch_stride =
            std::max(sp_->scratch_stride, ops::ScratchStride(ps.prepared.scratch_bytes));
      }
    }
    sp_->steps.push_back(std::move(ps));
    return Status::Ok();
  }

  // Arena roots that graph outputs use get their own per-run buffer (the
  // caller keeps it); then list the entries bound per run.
  void ClassifyEntries() {
    for (int e : sp_->output_entries) {
      Entry& root = sp_->entries[static_cast<size_t>(RootOf(*sp_, e))];
      if (root.kind == EntryKind::kArena) root.kind = EntryKind::kOutput;
    }
    for (size_t e = 0; e < sp_->entries.size(); ++e) {
      const Entry& entry = sp_->entries[e];
      const int id = static_cast<int>(e);
      if (entry.kind == EntryKind::kView) {
        const EntryKind rk = At(entry.index).kind;
        if (rk == EntryKind::kInput || rk == EntryKind::kOutput) sp_->per_run_views.push_back(id);
      } else if (entry.kind == EntryKind::kOutput) {
        sp_->output_buffers.push_back(id);
      } else if (entry.kind == EntryKind::kKernel) {
        sp_->kernel_entries.push_back(id);
      }
    }
  }

  // A Concat along an axis with only unit dimensions before it (channels of
  // NCHW at batch 1) lays its inputs out back to back. When every input is
  // an arena value that only this Concat reads, its producer writes it in
  // place into its slice of the Concat's output and the Concat step goes
  // away (counted as a view). Slices must be 64-byte aligned (kernels get
  // aligned outputs); an aliased Concat's output is not itself sliced again.
  void AliasConcats() {
    const size_t n = sp_->entries.size();
    std::vector<int> readers(n, 0), producer(n, -1);
    for (size_t s = 0; s < sp_->steps.size(); ++s) {
      const PlannedStep& ps = sp_->steps[s];
      for (uint32_t o = 0; o < ps.out_count; ++o) producer[ps.out_begin + o] = static_cast<int>(s);
      for (uint32_t i = 0; i < ps.in_count; ++i) {
        const int e = sp_->step_inputs[ps.in_begin + i];
        if (e >= 0) ++readers[static_cast<size_t>(RootOf(*sp_, e))];
      }
    }
    slice_parent_.assign(n, -1);
    slice_offset_.assign(n, 0);
    std::vector<bool> removed(sp_->steps.size(), false);
    for (size_t s = 0; s < sp_->steps.size(); ++s) {
      const PlannedStep& ps = sp_->steps[s];
      if (ps.dynamic || ps.step->op_type != "Concat" || ps.out_count != 1) continue;
      const int out = static_cast<int>(ps.out_begin);
      if (At(out).kind != EntryKind::kArena || !UnitDimsBeforeAxis(*ps.step, At(out).type)) continue;
      int64_t offset = 0;
      bool ok = true;
      for (uint32_t i = 0; ok && i < ps.in_count; ++i) {
        const int e = sp_->step_inputs[ps.in_begin + i];
        ok = e >= 0 && At(e).kind == EntryKind::kArena && readers[static_cast<size_t>(e)] == 1 &&
             producer[static_cast<size_t>(e)] >= 0 &&
             !removed[static_cast<size_t>(producer[static_cast<size_t>(e)])] &&
             At(e).type.dtype == At(out).type.dtype &&
             offset % static_cast<int64_t>(kTensorAlignment) == 0;
        if (ok) offset += Bytes(At(e).type);
      }
      if (!ok || offset != Bytes(At(out).type)) continue;
      offset = 0;
      for (uint32_t i = 0; i < ps.in_count; ++i) {
        const size_t e = static_cast<size_t>(sp_->step_inputs[ps.in_begin + i]);
        slice_parent_[e] = out;
        slice_offset_[e] = offset;
        offset += Bytes(At(static_cast<int>(e)).type);
      }
      removed[s] = true;
      ++views_;
    }
    size_t kept = 0;
    for (size_t s = 0; s < sp_->steps.size(); ++s) {
      if (!removed[s]) sp_->steps[kept++] = std::move(sp_->steps[s]);
    }
    sp_->steps.resize(kept);
  }

  static bool UnitDimsBeforeAxis(const Step& step, const ops::TensorType& out) {
    const int64_t rank = static_cast<int64_t>(out.shape.size());
    Result<int64_t> axis = step.attrs.GetInt("axis", 1);
    if (!axis.ok() || *axis < -rank || *axis >= rank) return false;
    const int64_t a = *axis < 0 ? *axis + rank : *axis;
    for (int64_t d = 0; d < a; ++d) {
      if (out.shape[static_cast<size_t>(d)] != 1) return false;
    }
    return true;
  }

  // Lifetimes in step indices: a buffer lives from its producing step to the
  // last step reading it or any view of it. A kByKernel kernel may return
  // (a view of) any input, so its inputs live as long as its outputs; values
  // a graph output may alias live to the end.
  void PlanLifetimes() {
    const int num_steps = static_cast<int>(sp_->steps.size());
    std::vector<int> first(sp_->entries.size(), -1), last(sp_->entries.size(), -1);
    for (int s = 0; s < num_steps; ++s) {
      const PlannedStep& ps = sp_->steps[static_cast<size_t>(s)];
      for (uint32_t o = 0; o < ps.out_count; ++o) {
        first[ps.out_begin + o] = s;
        last[ps.out_begin + o] = s;
      }
      for (uint32_t i = 0; i < ps.in_count; ++i) {
        const int e = sp_->step_inputs[ps.in_begin + i];
        if (e < 0) continue;
        const size_t r = static_cast<size_t>(RootOf(*sp_, e));
        last[r] = std::max(last[r], s);
      }
    }
    for (int e : sp_->output_entries) last[static_cast<size_t>(RootOf(*sp_, e))] = num_steps;
    for (int s = num_steps - 1; s >= 0; --s) {
      const PlannedStep& ps = sp_->steps[static_cast<size_t>(s)];
      if (ps.step->alloc != ops::OutputAlloc::kByKernel) continue;
      int out_last = s;
      for (uint32_t o = 0; o < ps.out_count; ++o) out_last = std::max(out_last, last[ps.out_begin + o]);
      for (uint32_t i = 0; i < ps.in_count; ++i) {
        const int e = sp_->step_inputs[ps.in_begin + i];
        if (e < 0) continue;
        const size_t r = static_cast<size_t>(RootOf(*sp_, e));
        last[r] = std::max(last[r], out_last);
      }
    }
    // An aliased Concat's output lives from its first slice's producer; each
    // slice (written by its producer) as long as the output.
    for (size_t e = 0; e < slice_parent_.size(); ++e) {
      const size_t p = static_cast<size_t>(slice_parent_[e]);
      if (slice_parent_[e] < 0) continue;
      first[p] = first[p] < 0 ? first[e] : std::min(first[p], first[e]);
    }
    for (size_t e = 0; e < slice_parent_.size(); ++e) {
      const size_t p = static_cast<size_t>(slice_parent_[e]);
      if (slice_parent_[e] < 0) continue;
      last[p] = std::max(last[p], first[p]);
      last[e] = std::max(last[e], last[p]);
    }
    for (int e : sp_->kernel_entries) {
      const int l = last[static_cast<size_t>(e)];
      if (l >= 0 && l < num_steps) sp_->steps[static_cast<size_t>(l)].release.push_back(e);
    }
    std::vector<int> buffer_of(sp_->entries.size(), -1);
    for (size_t e = 0; e < sp_->entries.size(); ++e) {
      if (sp_->entries[e].kind != EntryKind::kArena) continue;
      // An arena value some graph output may alias must survive every step.
      const int l = std::min(last[e], num_steps - 1);
      buffer_of[e] = static_cast<int>(sp_->buffers.size());
      sp_->buffers.push_back(BufferRequest{Bytes(sp_->entries[e].type), first[e], l});
      sp_->buffer_entries.push_back(static_cast<int>(e));
    }
    for (size_t e = 0; e < slice_parent_.size(); ++e) {
      if (slice_parent_[e] < 0) continue;
      BufferRequest& r = sp_->buffers[static_cast<size_t>(buffer_of[e])];
      r.parent = buffer_of[static_cast<size_t>(slice_parent_[e])];
      r.parent_offset = slice_offset_[e];
    }
    sp_->memory = PlanMemory(sp_->buffers);
    for (size_t b = 0; b < sp_->buffer_entries.size(); ++b) {
      sp_->entries[static_cast<size_t>(sp_->buffer_entries[b])].offset = sp_->memory.offsets[b];
    }
  }

  void FillStats() {
    PlanStats& st = sp_->stats;
    st.num_steps = sp_->steps.size();
    for (const PlannedStep& ps : sp_->steps) st.dynamic_steps += ps.dynamic ? 1 : 0;
    st.view_nodes = views_;
    st.folded_nodes = base_.folded_nodes + folded_;
    st.removed_nodes = base_.removed_nodes;
    for (const PlannedStep& ps : sp_->steps) st.flops += ps.cost.flops;
    st.fused_nodes = base_.fusion.batchnorms_folded + base_.fusion.biases +
                     base_.fusion.residuals + base_.fusion.activations;
    st.arena_bytes = sp_->memory.peak_bytes;
    st.naive_bytes = sp_->memory.naive_bytes;
    for (int e : sp_->output_buffers) st.output_bytes += Bytes(At(e).type);
  }

  SpecializedPlan* sp_;
  const Plan& base_;
  std::vector<int> slot_entry_;
  FoldBudget fold_budget_ = kSpecializeFoldBudget;
  size_t folded_ = 0;
  size_t views_ = 0;
  std::vector<int> slice_parent_;      // per entry: the aliased Concat output, or -1
  std::vector<int64_t> slice_offset_;  // and the byte offset in it
  std::vector<int> in_entries_;
  std::vector<ops::TensorType> in_types_, out_types_;
  std::vector<const Tensor*> in_values_;
};

// A plan with a batched tail (split_cut < its steps) only ever runs the
// steps from split_cut on (runtime/execution.cc; the rows run the batch-1
// plan): the values of the steps before it take no arena (left unbound,
// like a kernel's own outputs), the cut value counts as written at
// split_cut (the rows' copies), and the arena is planned again for the
// rest. ResNet-50 at batch 8: 57.8 MB for the whole batch, 28.9 MB for its
// tail (from layer2.1; the rows' arena is 7.2 MB). Slices, or another value
// live across the cut, keep the full plan.
void PlanTailArena(SpecializedPlan& sp) {
  const auto cut = static_cast<int>(sp.split_cut);
  if (sp.split_cut >= sp.steps.size() || sp.split_cut_entry < 0) return;
  std::vector<BufferRequest> requests = sp.buffers;
  std::vector<int> dropped;
  for (size_t b = 0; b < requests.size(); ++b) {
    BufferRequest& r = requests[b];
    const int e = sp.buffer_entries[b];
    if (r.parent >= 0) return;
    if (e == sp.split_cut_entry) {
      r.first = cut;
    } else if (r.last < cut) {
      r = BufferRequest{.bytes = 0, .first = 0, .last = 0};
      dropped.push_back(e);
    } else if (r.first < cut) {
      return;
    }
  }
  for (int e : dropped) sp.entries[static_cast<size_t>(e)].kind = EntryKind::kKernel;
  sp.buffers = std::move(requests);
  sp.memory = PlanMemory(sp.buffers);
  for (size_t b = 0; b < sp.buffer_entries.size(); ++b) {
    sp.entries[static_cast<size_t>(sp.buffer_entries[b])].offset = sp.memory.offsets[b];
  }
  sp.stats.arena_bytes = sp.memory.peak_bytes;
  sp.stats.naive_bytes = sp.memory.naive_bytes;
}

}  // namespace

Result<std::shared_ptr<SpecializedPlan>> Specialize(std::shared_ptr<const Plan> base,
                                                    std::vector<ops::TensorType> input_types,
                                                    std::shared_ptr<ArenaBudget> budget) {
  if (input_types.size() != base->input_slots.size()) {
    return Status::InvalidArgument("expected " + std::to_string(base->input_slots.size()) +
                                   " input types, got " + std::to_string(input_types.size()));
  }
  for (size_t i = 0; i < input_types.size(); ++i) {
    Result<int64_t> n = CheckedNumElements(input_types[i].shape, input_types[i].dtype);
    if (!n.ok()) {
      return n.status().WithPrefix(
          "input '" + base->slot_names[static_cast<size_t>(base->input_slots[i])] + "'");
    }
  }
  auto sp = std::make_shared<SpecializedPlan>();
  sp->base = std::move(base);
  sp->input_types = std::move(input_types);
  sp->budget_ = std::move(budget);
  Builder builder(sp.get());
  ORRERY_RETURN_IF_ERROR(builder.Build());
  sp->split_rows = RowSplitRows(*sp);
  sp->split_cut = RowSplitCut(*sp, sp->split_rows > 1 ? sp->split_rows : SeparableRows(*sp), &sp->split_cut_entry);
  // Only a plan whose batches run row by row runs just its tail; one that
  // runs whole (another batch's per-thread tail, say) keeps its arena.
  if (sp->split_rows > 1) PlanTailArena(*sp);
  sp->idle_.reserve(kMaxIdleRunStates);
  return sp;
}

}  // namespace orrery::runtime
