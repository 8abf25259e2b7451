// Metering and billing: the price table, the cost of a ledger entry, request
// ids and the billing report built from the catalog's ledger.
// Money is integer micro-units, so that lines, aggregates and the catalog's
// running totals reconcile exactly. docs/operations.md has the rules (who
// pays for what) and the price table format.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "api/proto/orrery.pb.h"
#include "base/status.h"
#include "storage/catalog.h"

namespace orrery {

// Built-in prices, used when --price-table is not given and for fields the
// file leaves out (0 in the file means free, not default: see LoadPriceTable).
v1::PriceTable DefaultPriceTable();

// Reads a PriceTable as JSON (proto field names, e.g.
// {"lane_second_micros": 20000}). Fields absent from the file keep their
// default. "" = the defaults. INVALID_ARGUMENT naming the problem for
// unreadable JSON, unknown fields or negative prices; NOT_FOUND for a
// missing file.
Result<v1::PriceTable> LoadPriceTable(const std::string& path);

// round(lane_ns * share * lane_second_micros / 1e9)
//   + round(bytes_loaded * gb_loaded_micros / 1e9), in integer arithmetic.
int64_t InferenceCostMicros(const v1::PriceTable& prices, int64_t lane_ns, double share, uint64_t bytes_loaded);
// The device part of an inference's cost: round(device_ns *
// device_second_micros / 1e9) + round(bytes_transferred * gb_loaded_micros /
// 1e9) (a host -> device transfer is priced like any move into a cache).
int64_t DeviceCostMicros(const v1::PriceTable& prices, int64_t device_ns, uint64_t bytes_transferred);
// round(stored_bytes * interval_ms * gb_month_stored_micros / (1e9 * 30 days in ms)).
int64_t StorageCostMicros(const v1::PriceTable& prices, uint64_t stored_bytes, int64_t interval_ms);

// A fresh request id: "r_" + 32 hex chars: 16 drawn once per process from
// the OS CSPRNG, then a 64-bit counter, so ids never repeat (within the
// process by the counter, across restarts by the prefix) and one costs no
// CSPRNG call (a RAND_bytes was ~5% of an inference's serving CPU).
std::string NewRequestId();
// A client-chosen OIP request id: 1-128 printable ASCII characters.
// INVALID_ARGUMENT naming the problem otherwise.
Status CheckRequestId(std::string_view id);

// The report over `tenant_ids`' ledgers (request filters applied), with
// per-(tenant, model) and per-(tenant, UTC day) aggregates, totals and the
// catalog's running totals. Cost: one ledger range scan per tenant.
Result<v1::BillingReportResponse> BuildBillingReport(const Catalog& catalog, const std::vector<std::string>& tenant_ids,
                                                     const v1::BillingReportRequest& request,
                                                     const v1::PriceTable& prices);

// "YYYY-MM-DD" (UTC) of a Unix time in ms.
std::string UtcDay(int64_t unix_ms);

}  // namespace orrery
