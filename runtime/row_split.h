// Running a batch one row at a time.
//
// A batch of N images through a CNN makes every activation N times larger:
// at batch 8, ResNet-50's 3.2 MB tensors become 25.7 MB, so each step reads
// its input from memory instead of L2 / L3, and the whole run is ~11% slower
// than 8 runs of one image (step minima 299 vs 269 ms on this host's Zen 5;
// MobileNetV2 and SqueezeNet 1.1 ~22%). When every step treats the rows of
// dim 0 independently, Execution runs such a batch as N runs of the batch-1
// plan (depth first: one image through all steps, then the next; with a
// group of T threads, T images at once, one per thread) and writes each
// row's outputs into the batch's. Batches whose activations stay in
// cache (the scenarios' small CNN: 2x faster batched at batch 8) and models
// whose weights one row uses only once or a few times (an MLP: 5x faster
// batched at batch 64, each weight load shared by all rows) keep the batched
// plan.
#pragma once

#include <cstdint>

#include "runtime/specialize.h"

namespace orrery::runtime {

// Batched plans whose arena is at least this many bytes run row by row.
// 8 MiB: a few times a core's L2 (1-2 MiB) and a fair share of a shared L3.
inline constexpr int64_t kRowSplitMinArenaBytes = int64_t{8} << 20;
// A Conv / Gemm / MatMul whose one row applies each weight fewer times than
// this (output positions per row) runs faster batched; if such steps carry
// more than 1/kRowSplitMaxLowReuseShare of the FLOPs, the batch stays whole.
inline constexpr int64_t kRowSplitMinWeightReuse = 16;
inline constexpr int64_t kRowSplitMaxLowReuseShare = 20;

// N when `plan` computes each of its N > 1 rows independently: every graph
// input and output and every step's input and output values (constants
// aside) has dim 0 == N, and every step is a kernel known to treat rows
// apart (Conv, pooling, elementwise, Gemm / MatMul with a constant right
// operand, Concat / Softmax / LayerNormalization on other axes, ...), with
// constants only as parameters or as operands broadcast along dim 0.
// 0 otherwise. O(steps x inputs).
int64_t SeparableRows(const SpecializedPlan& plan);

// N when Execution should run `plan` row by row: SeparableRows(plan) > 1,
// its arena is at least kRowSplitMinArenaBytes and at most 1/20 of its FLOPs
// are in weighted steps below kRowSplitMinWeightReuse. 0 otherwise.
int64_t RowSplitRows(const SpecializedPlan& plan);

// A row-split batch runs its first steps row by row and the rest as one
// batch, from the first step after which every Conv / Gemm / MatMul
// applies its weights at most kBatchedTailMaxReuse times per row (a 28x28
// plane or smaller) and writes at most kBatchedTailMaxOutputPerWeight times
// its weights' bytes for one row. There one row's activations are small
// against its weights, so the batch reads each weight once instead of once
// per row, while the early layers' large activations stay row by row. Only
// at a step where one value carries everything the rest reads from before
// it (a block boundary). Batch 8, one thread, p50 against rows to the end
// (Intel Xeon, 2 MiB L2): ResNet-50 from layer2.1 -4.5..-7%, ResNet-18
// -11..-14%, GoogLeNet -5..-8%. MobileNet-v2's depthwise layers at 14x14
// and up (weights 1/20 of their output) keep it row by row up to its 7x7
// blocks, p50 even: with its 28x28 and 14x14 blocks batched too it ran
// 6-8% slower.
inline constexpr int64_t kBatchedTailMaxReuse = 28 * 28;
inline constexpr int64_t kBatchedTailMaxOutputPerWeight = 8;

// Where Execution switches a batch of `rows` separable rows (split_rows,
// or SeparableRows for a plan that runs whole) from rows to the batch: the
// number of leading steps run row by row, steps.size() for all of them. A
// cut c < steps.size() has exactly one value that steps >= c read and
// steps < c produce, `*cut_entry` (an arena entry with dim 0 = rows), no
// graph output among the values steps < c produce, and weighted steps from
// c on as above. O(steps^2 x inputs).
size_t RowSplitCut(const SpecializedPlan& plan, int64_t rows, int* cut_entry);

}  // namespace orrery::runtime
