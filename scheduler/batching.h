// Batching helpers: which requests can run as one batch, and moving their
// tensors in and out of it. Requests batch along dim 0 (rows); everything
// else about their inputs must match.
//
// Costs: the checks are O(inputs x rank); ConcatRows and SplitRows copy
// every byte once (one allocation per tensor).
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "runtime/model.h"
#include "runtime/tensor.h"

namespace orrery {

// True when every input and output of the model has a declared rank >= 1
// and a dynamic dim 0: its outputs' rows then follow its inputs' rows.
bool BatchDimIsDynamic(const ModelSignature& signature);

// Rows of a request: the common dim 0 of its inputs; 0 when the inputs have
// no common dim 0 (or are scalars, or strings), i.e. cannot batch.
int64_t BatchRows(const std::vector<NamedTensor>& inputs);

// True when `b` can join `a` in a batch: the same input names in the same
// order, the same dtypes and the same dims after dim 0 (both have rows).
bool SameShapeBesidesRows(const std::vector<NamedTensor>& a, const std::vector<NamedTensor>& b);

// The inputs of several requests (each passed SameShapeBesidesRows with the
// first) concatenated along dim 0, in order.
Result<std::vector<NamedTensor>> ConcatRows(const std::vector<const std::vector<NamedTensor>*>& parts);

// The batch's outputs split back: part i gets `rows[i]` rows of every
// output, in order. INTERNAL when an output does not have sum(rows) rows.
Result<std::vector<std::vector<NamedTensor>>> SplitRows(const std::vector<NamedTensor>& outputs,
                                                        const std::vector<int64_t>& rows);

}  // namespace orrery
