#include "runtime/cuda/page_mapping.h"

#include <algorithm>
#include <string>

namespace orrery::runtime {

Result<std::unique_ptr<MappedPages>> MappedPages::Map(PageMapper* mapper, std::span<const uint32_t> pages) {
  if (mapper == nullptr) return Status::Unavailable("no CUDA device");
  if (pages.empty()) return Status::InvalidArgument("page mapping: no pages to map");
  std::vector<uint32_t> sorted(pages.begin(), pages.end());
  std::sort(sorted.begin(), sorted.end());
  if (sorted.back() >= mapper->num_pages()) {
    return Status::InvalidArgument("page mapping: page " + std::to_string(sorted.back()) + " is out of range (" +
                                   std::to_string(mapper->num_pages()) + " pages)");
  }
  if (auto dup = std::adjacent_find(sorted.begin(), sorted.end()); dup != sorted.end()) {
    return Status::InvalidArgument("page mapping: page " + std::to_string(*dup) + " is given twice");
  }
  const int64_t page = mapper->page_bytes();
  const int64_t bytes = static_cast<int64_t>(pages.size()) * page;
  ORRERY_ASSIGN_OR_RETURN(uint64_t address, mapper->Reserve(bytes));
  std::unique_ptr<MappedPages> mapped(new MappedPages(mapper, address, bytes));
  mapped->pages_.reserve(pages.size());
  Status st;
  for (size_t i = 0; i < pages.size() && st.ok(); ++i) {
    st = mapper->Map(address + i * static_cast<uint64_t>(page), pages[i]);
    if (st.ok()) mapped->pages_.push_back(pages[i]);
  }
  if (st.ok()) st = mapper->SetAccess(address, bytes);
  if (!st.ok()) {
    mapped->Undo();
    return st;
  }
  return mapped;
}

void MappedPages::Undo() {
  // Errors are dropped: a failing unmap leaves a page mapped in a range
  // nobody uses; the caller has either a better error to report or none.
  const int64_t page = mapper_->page_bytes();
  for (size_t i = pages_.size(); i > 0; --i) {
    static_cast<void>(mapper_->Unmap(address_ + (i - 1) * static_cast<uint64_t>(page), page));
  }
  // The range as reserved (Map's page count), mapped or not.
  static_cast<void>(mapper_->Free(address_, reserved_bytes_));
  pages_.clear();
  address_ = 0;
}

MappedPages::~MappedPages() {
  if (address_ != 0) Undo();
}

Result<std::unique_ptr<MappedPages>> MapWeightPages(PageMapper* mapper, const WeightLayout& layout,
                                                    std::span<const uint32_t> pages) {
  if (mapper == nullptr) return Status::Unavailable("no CUDA device");
  if (layout.page_bytes != mapper->page_bytes()) {
    return Status::FailedPrecondition("weights laid out for pages of " + std::to_string(layout.page_bytes) +
                                      " bytes, the device's are " + std::to_string(mapper->page_bytes()));
  }
  if (static_cast<int64_t>(pages.size()) != layout.pages) {
    return Status::FailedPrecondition("the model's weights need " + std::to_string(layout.pages) + " device pages (" +
                                      std::to_string(layout.used_bytes) + " bytes), the device cache assigned " +
                                      std::to_string(pages.size()));
  }
  return MappedPages::Map(mapper, pages);
}

}  // namespace orrery::runtime
