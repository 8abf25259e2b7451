// Static memory planning: place every planned intermediate of a specialised
// plan in one arena so that values whose lifetimes overlap never share
// bytes and the arena is as small as a greedy heuristic can make it.
//
// The heuristic is "greedy by size, best fit" (TFLite's GreedyMemoryPlanner,
// ONNX Runtime's planner): buffers in decreasing size order each take the
// smallest gap between already placed, time-overlapping buffers that fits,
// or go after the last of them. Offsets and sizes are multiples of
// kTensorAlignment (64 bytes).
//
// A request may instead be a slice of another (`parent`): it gets no space
// of its own but the bytes at parent_offset inside its parent, e.g. a Concat
// input written in place into the Concat's output. Its lifetime must lie
// within its parent's.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace orrery::runtime {

struct BufferRequest {
  int64_t bytes = 0;  // unaligned size; 0 is allowed (no space needed)
  int first = 0;      // step that writes it
  int last = 0;       // last step that needs it (inclusive), >= first
  int parent = -1;           // index of the request this one is a slice of
  int64_t parent_offset = 0;  // its byte offset there, a multiple of 64
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // one per request
  int64_t peak_bytes = 0;        // arena size
  int64_t naive_bytes = 0;       // sum of aligned sizes: one buffer per value, no reuse
                                 // (slices counted in their parents)
};

int64_t AlignedBytes(int64_t bytes);

MemoryPlan PlanMemory(std::span<const BufferRequest> requests);

// INTERNAL naming the first violation: a misaligned offset, a buffer past
// peak_bytes, two buffers that are live at the same step and overlap
// (a slice and its own parent excepted), or a slice that is not where its
// parent_offset says, runs past its parent, outlives it or nests.
Status CheckMemoryPlan(std::span<const BufferRequest> requests, const MemoryPlan& plan);

}  // namespace orrery::runtime
