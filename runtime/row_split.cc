#include "runtime/row_split.h"

#include <set>
#include <string_view>
#include <vector>

namespace orrery::runtime {
namespace {

// How a kernel treats dim 0, for the kernels that keep rows apart.
enum class RowRule {
  kNone,       // unknown or mixes rows: no split
  kPerRow,     // input 0 is the rows; constants from input 1 on are parameters
  kBroadcast,  // elementwise with broadcasting: constants broadcast along dim 0
  kWeighted,   // Conv / Gemm / MatMul: constant weights and bias, fused residual last
  kAxis,       // Concat / Softmax / LayerNormalization: rows apart unless axis is 0
};

RowRule RuleOf(std::string_view op) {
  static constexpr std::string_view kPerRow[] = {
      "Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Elu",
      "Selu", "Gelu", "Erf", "Exp", "Log", "Sqrt", "Abs", "Neg", "Reciprocal", "Softplus",
      "Softsign", "Identity", "Dropout", "MaxPool", "AveragePool", "GlobalAveragePool",
      "GlobalMaxPool", "LpPool", "LRN", "BatchNormalization", "InstanceNormalization",
      "Flatten", "Reshape", "Squeeze", "Unsqueeze", "Transpose"};
  static constexpr std::string_view kBroadcast[] = {"Add", "Sub", "Mul", "Div", "Pow", "Max",
                                                    "Min", "Sum", "Mean", "PRelu"};
  for (std::string_view o : kPerRow) {
    if (op == o) return RowRule::kPerRow;
  }
  for (std::string_view o : kBroadcast) {
    if (op == o) return RowRule::kBroadcast;
  }
  if (op == "Conv" || op == "Gemm" || op == "MatMul") return RowRule::kWeighted;
  if (op == "Concat" || op == "Softmax" || op == "LogSoftmax" || op == "LayerNormalization") {
    return RowRule::kAxis;
  }
  return RowRule::kNone;
}

bool HasRows(const ops::TensorType& t, int64_t rows) {
  return !t.shape.empty() && t.shape[0] == rows;
}

// A constant operand of a broadcasting op that is the same for every row.
bool BroadcastAlongRows(const ops::TensorType& t, size_t out_rank) {
  return t.shape.size() < out_rank || (!t.shape.empty() && t.shape[0] == 1);
}

// The step's attributes allow a row split (axis attributes away from dim 0, no
// transposed left operand, no outputs that index the whole tensor).
bool AttributesKeepRows(const PlannedStep& ps, const SpecializedPlan& plan, size_t in_rank) {
  const Step& step = *ps.step;
  const std::string_view op = step.op_type;
  auto int_attr = [&](std::string_view name, int64_t dflt, int64_t* v) {
    Result<int64_t> r = step.attrs.GetInt(name, dflt);
    if (!r.ok()) return false;
    *v = *r;
    return true;
  };
  auto away_from_rows = [&](int64_t axis) {
    return axis != 0 && axis != -static_cast<int64_t>(in_rank);
  };
  int64_t v = 0;
  if (op == "Concat") return int_attr("axis", 0, &v) && step.attrs.Has("axis") && away_from_rows(v);
  if (op == "Softmax" || op == "LogSoftmax") {
    return int_attr("axis", plan.base->opset >= 13 ? -1 : 1, &v) && away_from_rows(v);
  }
  if (op == "LayerNormalization") return int_attr("axis", -1, &v) && away_from_rows(v);
  if (op == "Gemm") return int_attr("transA", 0, &v) && v == 0;
  if (op == "Transpose") {
    Result<std::vector<int64_t>> perm = step.attrs.GetInts("perm");
    return perm.ok() && !perm->empty() && (*perm)[0] == 0;
  }
  // Training BatchNormalization normalises by the batch's statistics.
  if (op == "BatchNormalization" && !(int_attr("training_mode", 0, &v) && v == 0)) return false;
  // MaxPool's Indices and training BatchNormalization's statistics span rows.
  if (op == "MaxPool" || op == "BatchNormalization") {
    for (uint32_t o = 1; o < ps.out_count; ++o) {
      if (plan.entries[ps.out_begin + o].slot >= 0) return false;
    }
  }
  return true;
}

bool StepKeepsRows(const SpecializedPlan& plan, const PlannedStep& ps, int64_t rows) {
  if (ps.dynamic) return false;
  const RowRule rule = RuleOf(ps.step->op_type);
  if (rule == RowRule::kNone) return false;
  size_t out_rank = 0;
  for (uint32_t o = 0; o < ps.out_count; ++o) {
    const Entry& out = plan.entries[ps.out_begin + o];
    if (out.slot < 0) continue;  // absent optional output
    if (!out.typed || !HasRows(out.type, rows)) return false;
    if (o == 0) out_rank = out.type.shape.size();
  }
  size_t in_rank = 0;
  for (uint32_t i = 0; i < ps.in_count; ++i) {
    const int e = plan.step_inputs[ps.in_begin + i];
    if (e < 0) continue;  // absent optional input
    const Entry& in = plan.entries[static_cast<size_t>(e)];
    if (!in.typed) return false;
    const size_t rank = in.type.shape.size();
    if (i == 0) in_rank = rank;
    const bool constant = plan.entries[static_cast<size_t>(RootOf(plan, e))].kind == EntryKind::kConstant;
    if (!constant) {
      if (!HasRows(in.type, rows)) return false;
      // A lower-rank operand would broadcast along other axes: its dim 0
      // would index something other than rows.
      if ((rule == RowRule::kBroadcast || rule == RowRule::kAxis) && i > 0 && rank != out_rank) return false;
      if (rule == RowRule::kWeighted && i > 0) {
        // The fused residual (last, same shape as the output), or MatMul's
        // batched right operand (rank >= 3, as its left one).
        const bool residual = i == 3 && rank == out_rank;
        const bool batched_right = ps.step->op_type == "MatMul" && i == 1 && rank >= 3 && rank == out_rank;
        if (!residual && !batched_right) return false;
      }
      continue;
    }
    switch (rule) {
      case RowRule::kPerRow:
        if (i == 0) return false;
        break;
      case RowRule::kBroadcast:
        if (!BroadcastAlongRows(in.type, out_rank)) return false;
        break;
      case RowRule::kWeighted:
        if (i == 0 || i > 2) return false;
        // A right operand of rank > 2 would be batched against the rows;
        // Gemm's C must not have a row per output row.
        if (i == 1 && ps.step->op_type == "MatMul" && rank > 2) return false;
        if (i == 2 && ps.step->op_type == "Gemm" && !BroadcastAlongRows(in.type, 2)) return false;
        break;
      case RowRule::kAxis:
        if (ps.step->op_type != "LayerNormalization" || i == 0) return false;
        break;
      case RowRule::kNone:
        return false;
    }
  }
  return AttributesKeepRows(ps, plan, in_rank);
}

// How many times one row applies each weight of a Conv / Gemm / MatMul: its
// output positions per row (a Conv's spatial size, a MatMul's middle dims).
int64_t WeightReusePerRow(const SpecializedPlan& plan, const PlannedStep& ps) {
  const Shape& out = plan.entries[ps.out_begin].type.shape;
  const std::string_view op = ps.step->op_type;
  int64_t reuse = 1;
  if (op == "Conv") {
    for (size_t d = 2; d < out.size(); ++d) reuse *= out[d];
  } else if (op == "MatMul") {
    for (size_t d = 1; d + 1 < out.size(); ++d) reuse *= out[d];
  }
  return reuse;
}

}  // namespace

int64_t SeparableRows(const SpecializedPlan& plan) {
  if (plan.input_entries.empty() || plan.output_entries.empty()) return 0;
  const Entry& first = plan.entries[static_cast<size_t>(plan.input_entries[0])];
  if (!first.typed || first.type.shape.empty()) return 0;
  const int64_t rows = first.type.shape[0];
  if (rows < 1) return 0;
  for (int e : plan.input_entries) {
    if (!HasRows(plan.entries[static_cast<size_t>(e)].type, rows)) return 0;
  }
  for (int e : plan.output_entries) {
    const Entry& out = plan.entries[static_cast<size_t>(e)];
    if (!out.typed || !HasRows(out.type, rows)) return 0;
    if (plan.entries[static_cast<size_t>(RootOf(plan, e))].kind == EntryKind::kConstant) return 0;
  }
  for (const PlannedStep& ps : plan.steps) {
    if (!StepKeepsRows(plan, ps, rows)) return 0;
  }
  return rows;
}

int64_t RowSplitRows(const SpecializedPlan& plan) {
  if (plan.memory.peak_bytes < kRowSplitMinArenaBytes) return 0;
  const int64_t rows = SeparableRows(plan);
  if (rows <= 1) return 0;
  int64_t flops = 0, low_reuse_flops = 0;
  for (const PlannedStep& ps : plan.steps) {
    flops += ps.cost.flops;
    if (RuleOf(ps.step->op_type) == RowRule::kWeighted && WeightReusePerRow(plan, ps) < kRowSplitMinWeightReuse) {
      low_reuse_flops += ps.cost.flops;
    }
  }
  return low_reuse_flops * kRowSplitMaxLowReuseShare > flops ? 0 : rows;
}

size_t RowSplitCut(const SpecializedPlan& plan, int64_t rows, int* cut_entry) {
  const size_t n = plan.steps.size();
  *cut_entry = -1;
  if (rows <= 1 || n < 2) return n;
  // The step producing each entry (n: bound, not produced by a step).
  std::vector<size_t> producer(plan.entries.size(), n);
  for (size_t s = 0; s < n; ++s) {
    const PlannedStep& ps = plan.steps[s];
    for (uint32_t o = 0; o < ps.out_count; ++o) producer[ps.out_begin + o] = s;
  }
  auto produced_before = [&](int e, size_t c) {
    const size_t p = producer[static_cast<size_t>(RootOf(plan, e))];
    return p < c;
  };
  // batched[c]: every weighted step from c on applies its weights at most
  // kBatchedTailMaxReuse times per row and reads at least 1 /
  // kBatchedTailMaxOutputPerWeight as many bytes of constant operands
  // (weights) as one row of it writes.
  const auto bytes = [&](int e) {
    const Entry& entry = plan.entries[static_cast<size_t>(e)];
    return entry.typed ? NumElements(entry.type.shape) * static_cast<int64_t>(DTypeSize(entry.type.dtype)) : 0;
  };
  std::vector<bool> batched(n + 1, true);
  for (size_t s = n; s-- > 0;) {
    const PlannedStep& ps = plan.steps[s];
    const bool weighted = RuleOf(ps.step->op_type) == RowRule::kWeighted;
    int64_t weights = 0, row_out = 0;
    if (weighted) {
      for (uint32_t i = 0; i < ps.in_count; ++i) {
        const int e = plan.step_inputs[ps.in_begin + i];
        if (e >= 0 && plan.entries[static_cast<size_t>(RootOf(plan, e))].kind == EntryKind::kConstant) {
          weights += bytes(e);
        }
      }
      for (uint32_t o = 0; o < ps.out_count; ++o) row_out += bytes(static_cast<int>(ps.out_begin + o));
      row_out /= rows;
    }
    batched[s] = batched[s + 1] && (!weighted || (WeightReusePerRow(plan, ps) <= kBatchedTailMaxReuse &&
                                                  weights * kBatchedTailMaxOutputPerWeight >= row_out));
  }
  for (size_t c = 1; c < n; ++c) {
    if (!batched[c]) continue;
    bool outputs_after = true;
    for (int e : plan.output_entries) outputs_after = outputs_after && !produced_before(e, c);
    if (!outputs_after) continue;
    std::set<int> live;
    for (size_t s = c; s < n; ++s) {
      const PlannedStep& ps = plan.steps[s];
      for (uint32_t i = 0; i < ps.in_count; ++i) {
        const int e = plan.step_inputs[ps.in_begin + i];
        if (e >= 0 && produced_before(e, c)) live.insert(RootOf(plan, e));
      }
    }
    if (live.size() != 1) continue;
    const Entry& root = plan.entries[static_cast<size_t>(*live.begin())];
    if (root.kind != EntryKind::kArena || !root.typed || !HasRows(root.type, rows)) continue;
    *cut_entry = *live.begin();
    return c;
  }
  return n;
}

}  // namespace orrery::runtime
