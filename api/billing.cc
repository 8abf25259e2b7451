#include "api/billing.h"

#include <atomic>
#include <cmath>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include <google/protobuf/util/json_util.h>

#include "tenancy/api_key.h"

namespace orrery {
namespace {

constexpr int64_t kNsPerSecond = 1'000'000'000;
constexpr int64_t kBytesPerGb = 1'000'000'000;
constexpr int64_t kMsPerMonth = int64_t{30} * 24 * 3600 * 1000;

// round(a * b / d) for non-negative a, b and positive d, without overflow.
int64_t MulDivRound(int64_t a, int64_t b, __int128 d) {
  const __int128 p = static_cast<__int128>(a) * b;
  return static_cast<int64_t>((p + d / 2) / d);
}

v1::BillingLine ToLine(const LedgerEntry& e) {
  v1::BillingLine l;
  l.set_tenant_id(e.tenant_id());
  l.set_kind(e.kind() == LedgerEntry::STORAGE       ? "storage"
             : e.kind() == LedgerEntry::CALIBRATION ? "calibration"
                                                    : "inference");
  l.set_model(e.model_name());
  l.set_model_version(e.model_version());
  l.set_request_id(e.request_id());
  l.set_arrival_unix_us(e.arrival_unix_us());
  l.set_start_unix_us(e.start_unix_us());
  l.set_end_unix_us(e.end_unix_us());
  l.set_queue_us(e.queue_us());
  l.set_status(e.status());
  l.set_batch_size(e.batch_size());
  l.set_batch_share(e.batch_share());
  l.set_lane_ns(e.lane_ns());
  l.set_bytes_loaded(e.bytes_loaded());
  l.set_stored_bytes(e.stored_bytes());
  l.set_interval_ms(e.interval_ms());
  l.set_cost_micros(e.cost_micros());
  l.set_unix_ms(e.unix_ms());
  l.set_placement(e.placement());
  l.set_device_ns(e.device_ns());
  l.set_bytes_transferred(e.bytes_transferred());
  return l;
}

void Add(v1::BillingAggregate* a, const LedgerEntry& e) {
  a->set_entries(a->entries() + 1);
  a->set_lane_ns(a->lane_ns() + e.lane_ns());
  a->set_bytes_loaded(a->bytes_loaded() + e.bytes_loaded());
  a->set_device_ns(a->device_ns() + e.device_ns());
  a->set_bytes_transferred(a->bytes_transferred() + e.bytes_transferred());
  a->set_cost_micros(a->cost_micros() + e.cost_micros());
}

}  // namespace

v1::PriceTable DefaultPriceTable() {
  v1::PriceTable p;
  p.set_currency("USD");
  p.set_lane_second_micros(20'000);        // $0.02 per lane-second
  p.set_device_second_micros(200'000);     // $0.20 per device-second
  p.set_gb_loaded_micros(1'000);           // $0.001 per GB moved into a cache
  p.set_gb_month_stored_micros(20'000);    // $0.02 per GB-month stored
  return p;
}

Result<v1::PriceTable> LoadPriceTable(const std::string& path) {
  v1::PriceTable prices = DefaultPriceTable();
  if (path.empty()) return prices;
  std::ifstream in(path);
  if (!in) return Status::NotFound("price table '" + path + "' cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  // Unknown fields are errors (a typo must not silently bill the default).
  // The fields are proto3 `optional`, so merging the file into the defaults
  // keeps a missing field's default and an explicit 0 means free.
  google::protobuf::util::JsonParseOptions options;
  v1::PriceTable file;
  auto st = google::protobuf::util::JsonStringToMessage(text.str(), &file, options);
  if (!st.ok()) return Status::InvalidArgument("price table '" + path + "': " + std::string(st.message()));
  prices.MergeFrom(file);
  if (prices.lane_second_micros() < 0 || prices.device_second_micros() < 0 || prices.gb_loaded_micros() < 0 ||
      prices.gb_month_stored_micros() < 0) {
    return Status::InvalidArgument("price table '" + path + "': prices must not be negative");
  }
  return prices;
}

int64_t InferenceCostMicros(const v1::PriceTable& prices, int64_t lane_ns, double share, uint64_t bytes_loaded) {
  const int64_t charged_ns = std::max<int64_t>(0, std::llround(static_cast<double>(lane_ns) * share));
  return MulDivRound(charged_ns, prices.lane_second_micros(), kNsPerSecond) +
         MulDivRound(static_cast<int64_t>(bytes_loaded), prices.gb_loaded_micros(), kBytesPerGb);
}

int64_t DeviceCostMicros(const v1::PriceTable& prices, int64_t device_ns, uint64_t bytes_transferred) {
  return MulDivRound(std::max<int64_t>(device_ns, 0), prices.device_second_micros(), kNsPerSecond) +
         MulDivRound(static_cast<int64_t>(bytes_transferred), prices.gb_loaded_micros(), kBytesPerGb);
}

int64_t StorageCostMicros(const v1::PriceTable& prices, uint64_t stored_bytes, int64_t interval_ms) {
  const __int128 p = static_cast<__int128>(stored_bytes) * std::max<int64_t>(interval_ms, 0) *
                     prices.gb_month_stored_micros();
  const __int128 d = static_cast<__int128>(kBytesPerGb) * kMsPerMonth;
  return static_cast<int64_t>((p + d / 2) / d);
}

std::string NewRequestId() {
  static const std::string prefix = std::string("r_").append(RandomHex(16));
  static std::atomic<uint64_t> next{0};
  const uint64_t n = next.fetch_add(1, std::memory_order_relaxed);
  std::string id = prefix;
  id.resize(prefix.size() + 16);
  for (size_t i = 0; i < 16; ++i) id[id.size() - 1 - i] = "0123456789abcdef"[(n >> (4 * i)) & 0xf];
  return id;
}

Status CheckRequestId(std::string_view id) {
  if (id.empty() || id.size() > 128) return Status::InvalidArgument("request id must be 1-128 characters");
  for (char c : id) {
    if (c < 0x21 || c > 0x7e) {
      return Status::InvalidArgument("request id '" + std::string(id) +
                                     "' must be printable ASCII without spaces");
    }
  }
  return Status::Ok();
}

std::string UtcDay(int64_t unix_ms) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
  return buf;
}

Result<v1::BillingReportResponse> BuildBillingReport(const Catalog& catalog, const std::vector<std::string>& tenant_ids,
                                                     const v1::BillingReportRequest& request,
                                                     const v1::PriceTable& prices) {
  if (request.from_unix_ms() < 0 || request.to_unix_ms() < 0) {
    return Status::InvalidArgument("from_unix_ms and to_unix_ms must not be negative");
  }
  if (request.to_unix_ms() != 0 && request.to_unix_ms() <= request.from_unix_ms()) {
    return Status::InvalidArgument("to_unix_ms must be after from_unix_ms");
  }
  v1::BillingReportResponse out;
  *out.mutable_prices() = prices;
  std::map<std::pair<std::string, std::string>, v1::BillingAggregate> by_model, by_day;
  for (const std::string& tenant : tenant_ids) {
    ORRERY_ASSIGN_OR_RETURN(std::vector<LedgerEntry> entries,
                            catalog.ListLedger(tenant, request.from_unix_ms(), request.to_unix_ms()));
    for (const LedgerEntry& e : entries) {
      const bool storage = e.kind() == LedgerEntry::STORAGE;
      if (!request.model().empty() && (storage || e.model_name() != request.model())) continue;
      if (!request.omit_lines()) *out.add_lines() = ToLine(e);
      const std::string model = storage ? "(storage)" : e.model_name();
      v1::BillingAggregate& m = by_model[{tenant, model}];
      m.set_tenant_id(tenant);
      m.set_model(model);
      Add(&m, e);
      const std::string day = UtcDay(e.unix_ms());
      v1::BillingAggregate& d = by_day[{tenant, day}];
      d.set_tenant_id(tenant);
      d.set_day(day);
      Add(&d, e);
      out.set_total_entries(out.total_entries() + 1);
      out.set_total_cost_micros(out.total_cost_micros() + e.cost_micros());
    }
    ORRERY_ASSIGN_OR_RETURN(LedgerTotals totals, catalog.GetLedgerTotals(tenant));
    out.set_counter_entries(out.counter_entries() + totals.entries());
    out.set_counter_cost_micros(out.counter_cost_micros() + totals.cost_micros());
  }
  for (auto& [k, a] : by_model) *out.add_by_model() = std::move(a);
  for (auto& [k, a] : by_day) *out.add_by_day() = std::move(a);
  return out;
}

}  // namespace orrery
