// A model's weights in the device cache's pages, through virtual memory:
// the device's memory is N physical pages (cache/device_cache.h hands out
// their numbers); a model gets one contiguous virtual range of its page
// count x page_bytes, the pages it was assigned mapped into it in order
// (any page numbers), so its constants (runtime/cuda/weight_layout.h) are
// contiguous although its pages are not.
//
// PageMapper is the small interface over the virtual memory operations; the
// CUDA driver implementation (cuMemAddressReserve / cuMemMap / ...) is
// runtime/cuda/cuda_pages.h, built only with nvcc, and the CPU tests use a
// fake (tests/unit/cuda/page_mapping_test.cc). MappedPages is the plain C++
// logic over it (order, rollback, release), the same in both.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "runtime/cuda/weight_layout.h"

namespace orrery::runtime {

// Virtual memory operations on one device's physical pages. Thread-safe.
class PageMapper {
 public:
  virtual ~PageMapper() = default;
  virtual int64_t page_bytes() const = 0;
  virtual int64_t num_pages() const = 0;
  // Reserves `bytes` (whole pages) of device address space, page-aligned.
  virtual Result<uint64_t> Reserve(int64_t bytes) = 0;
  // Maps physical page `page` (< num_pages()) at `address` (page_bytes long,
  // inside a reserved range).
  virtual Status Map(uint64_t address, uint32_t page) = 0;
  // Lets the device read and write [address, address + bytes) (mapped pages).
  virtual Status SetAccess(uint64_t address, int64_t bytes) = 0;
  // Undo Map (one page's mapping) and Reserve (the whole range).
  virtual Status Unmap(uint64_t address, int64_t bytes) = 0;
  virtual Status Free(uint64_t address, int64_t bytes) = 0;
};

// One reserved range with pages mapped at consecutive page offsets and
// access set; destruction unmaps every page and frees the range (the
// physical pages stay the device cache's, free for reuse). The caller must
// not let the device read the range after that.
class MappedPages {
 public:
  // Reserves pages.size() x page_bytes, maps pages[i] at offset
  // i x page_bytes, sets access on the whole range. INVALID_ARGUMENT for no
  // pages, a page number out of range or a page given twice (nothing
  // reserved); a mapper error midway unmaps what was mapped, frees the range
  // and is returned. O(pages) mapper calls.
  static Result<std::unique_ptr<MappedPages>> Map(PageMapper* mapper, std::span<const uint32_t> pages);
  ~MappedPages();
  MappedPages(const MappedPages&) = delete;
  MappedPages& operator=(const MappedPages&) = delete;

  uint64_t address() const { return address_; }
  int64_t bytes() const { return static_cast<int64_t>(pages_.size()) * mapper_->page_bytes(); }
  const std::vector<uint32_t>& pages() const { return pages_; }

 private:
  MappedPages(PageMapper* mapper, uint64_t address, int64_t reserved_bytes)
      : mapper_(mapper), address_(address), reserved_bytes_(reserved_bytes) {}
  // Unmaps pages_ (last first) and frees the range.
  void Undo();

  PageMapper* mapper_;
  uint64_t address_;  // 0 once undone
  int64_t reserved_bytes_;
  std::vector<uint32_t> pages_;  // mapped so far, in offset order
};

// A model's constants over its pages: `pages` (what the device cache
// assigned) must be exactly layout.pages pages of the mapper's size, else
// FAILED_PRECONDITION naming both counts (the cache charged another size
// than the layout needs); then MappedPages::Map.
Result<std::unique_ptr<MappedPages>> MapWeightPages(PageMapper* mapper, const WeightLayout& layout,
                                                    std::span<const uint32_t> pages);

}  // namespace orrery::runtime
