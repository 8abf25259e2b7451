// Heap allocations counted in a test binary: counting_new.cc replaces the
// global operator new / delete (every unaligned form) of each binary it is
// linked into, so tests can assert that steady-state inference allocates
// nothing. Add TensorBufferAllocationCount() for Tensor buffers, which come
// from aligned_alloc.
#pragma once

#include <cstdint>

namespace orrery::testing {

// operator new calls in this process so far (all threads).
uint64_t TestHeapAllocations();

}  // namespace orrery::testing
