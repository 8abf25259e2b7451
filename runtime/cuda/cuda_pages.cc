#include "runtime/cuda/cuda_pages.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

namespace orrery::runtime {

namespace {

// The driver ABI these entry points are asked for (their signatures have
// not changed since the VMM API appeared in 10.2).
constexpr unsigned int kDriverApiVersion = 12000;

struct Driver {
  decltype(&::cuGetErrorString) get_error_string = nullptr;
  decltype(&::cuMemGetAllocationGranularity) granularity = nullptr;
  decltype(&::cuMemCreate) create = nullptr;
  decltype(&::cuMemRelease) release = nullptr;
  decltype(&::cuMemAddressReserve) reserve = nullptr;
  decltype(&::cuMemAddressFree) free = nullptr;
  decltype(&::cuMemMap) map = nullptr;
  decltype(&::cuMemUnmap) unmap = nullptr;
  decltype(&::cuMemSetAccess) set_access = nullptr;

  template <typename F>
  static Status Load(const char* symbol, F* fn) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t err = cudaGetDriverEntryPointByVersion(symbol, &p, kDriverApiVersion, cudaEnableDefault, &found);
    if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || p == nullptr) {
      return Status::Unavailable(std::string("CUDA driver has no ") + symbol + " (virtual memory management)");
    }
    *fn = reinterpret_cast<F>(p);
    return Status::Ok();
  }

  Status LoadAll() {
    ORRERY_RETURN_IF_ERROR(Load("cuGetErrorString", &get_error_string));
    ORRERY_RETURN_IF_ERROR(Load("cuMemGetAllocationGranularity", &granularity));
    ORRERY_RETURN_IF_ERROR(Load("cuMemCreate", &create));
    ORRERY_RETURN_IF_ERROR(Load("cuMemRelease", &release));
    ORRERY_RETURN_IF_ERROR(Load("cuMemAddressReserve", &reserve));
    ORRERY_RETURN_IF_ERROR(Load("cuMemAddressFree", &free));
    ORRERY_RETURN_IF_ERROR(Load("cuMemMap", &map));
    ORRERY_RETURN_IF_ERROR(Load("cuMemUnmap", &unmap));
    return Load("cuMemSetAccess", &set_access);
  }

  Status Check(CUresult r, const char* what) const {
    if (r == CUDA_SUCCESS) return Status::Ok();
    const char* text = nullptr;
    if (get_error_string == nullptr || get_error_string(r, &text) != CUDA_SUCCESS || text == nullptr) {
      text = "unknown CUDA driver error";
    }
    const StatusCode code = r == CUDA_ERROR_OUT_OF_MEMORY ? StatusCode::kResourceExhausted : StatusCode::kInternal;
    return Status(code, std::string(what) + ": " + text + " (" + std::to_string(static_cast<int>(r)) + ")");
  }
};

class CudaPages final : public PageMapper {
 public:
  CudaPages(const Driver& driver, int ordinal, int64_t page_bytes)
      : driver_(driver), ordinal_(ordinal), page_bytes_(page_bytes) {}
  ~CudaPages() override {
    for (CUmemGenericAllocationHandle h : handles_) driver_.release(h);
  }

  Status Create(int64_t num_pages) {
    const CUmemAllocationProp prop = Prop();
    size_t granularity = 0;
    ORRERY_RETURN_IF_ERROR(driver_.Check(driver_.granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                                         "cuMemGetAllocationGranularity"));
    if (granularity == 0 || page_bytes_ % static_cast<int64_t>(granularity) != 0) {
      return Status::InvalidArgument("CUDA device page size " + std::to_string(page_bytes_) +
                                     " is not a multiple of the allocation granularity " +
                                     std::to_string(granularity));
    }
    handles_.reserve(static_cast<size_t>(num_pages));
    for (int64_t i = 0; i < num_pages; ++i) {
      CUmemGenericAllocationHandle h{};
      ORRERY_RETURN_IF_ERROR(driver_.Check(driver_.create(&h, static_cast<size_t>(page_bytes_), &prop, 0),
                                           "cuMemCreate (device page)"));
      handles_.push_back(h);
    }
    return Status::Ok();
  }

  int64_t page_bytes() const override { return page_bytes_; }
  int64_t num_pages() const override { return static_cast<int64_t>(handles_.size()); }

  Result<uint64_t> Reserve(int64_t bytes) override {
    CUdeviceptr p = 0;
    ORRERY_RETURN_IF_ERROR(driver_.Check(
        driver_.reserve(&p, static_cast<size_t>(bytes), static_cast<size_t>(page_bytes_), 0, 0), "cuMemAddressReserve"));
    return static_cast<uint64_t>(p);
  }
  Status Map(uint64_t address, uint32_t page) override {
    if (page >= handles_.size()) return Status::InvalidArgument("CUDA page " + std::to_string(page) + " out of range");
    return driver_.Check(driver_.map(static_cast<CUdeviceptr>(address), static_cast<size_t>(page_bytes_), 0,
                                     handles_[page], 0),
                         "cuMemMap");
  }
  Status SetAccess(uint64_t address, int64_t bytes) override {
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = ordinal_;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return driver_.Check(driver_.set_access(static_cast<CUdeviceptr>(address), static_cast<size_t>(bytes), &access, 1),
                         "cuMemSetAccess");
  }
  Status Unmap(uint64_t address, int64_t bytes) override {
    return driver_.Check(driver_.unmap(static_cast<CUdeviceptr>(address), static_cast<size_t>(bytes)), "cuMemUnmap");
  }
  Status Free(uint64_t address, int64_t bytes) override {
    return driver_.Check(driver_.free(static_cast<CUdeviceptr>(address), static_cast<size_t>(bytes)),
                         "cuMemAddressFree");
  }

 private:
  CUmemAllocationProp Prop() const {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = ordinal_;
    return prop;
  }

  const Driver driver_;
  const int ordinal_;
  const int64_t page_bytes_;
  std::vector<CUmemGenericAllocationHandle> handles_;  // page i's physical memory
};

}  // namespace

Result<std::unique_ptr<PageMapper>> CreateCudaPages(int ordinal, int64_t page_bytes, int64_t num_pages) {
  Driver driver;
  ORRERY_RETURN_IF_ERROR(driver.LoadAll());
  auto pages = std::make_unique<CudaPages>(driver, ordinal, page_bytes);
  ORRERY_RETURN_IF_ERROR(pages->Create(num_pages));  // on failure, what was created is released
  return std::unique_ptr<PageMapper>(std::move(pages));
}

}  // namespace orrery::runtime
