#!/usr/bin/env bash
# Runs the billing and admin examples of docs/operations.md verbatim through
# the real orrery CLI against a real orreryd started with a price table, then
# checks the reports: the retried request id is billed once, lines, per-model
# and per-day aggregates and the server counters reconcile, csv and json
# parse, drain refuses inferences until resume.
# Usage: cli_billing.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
source "$src/tests/integration/cli_lib.sh"
cli_work cli-billing
cli_link_checkout "$src" "$build"

echo '{"currency": "EUR", "lane_second_micros": 50000, "gb_month_stored_micros": 10000}' > "$work/prices.json"
cli_start_orreryd "$build" --data-dir "$work/orrery-data" --price-table "$work/prices.json" --calibrate-uploads false

cli_doc_block "$src/docs/operations.md" billing-example > "$work/billing.sh"
cli_doc_block "$src/docs/operations.md" admin-example > "$work/admin.sh"
[ -s "$work/billing.sh" ] && [ -s "$work/admin.sh" ] || { echo "FAIL: example blocks missing in docs/operations.md"; exit 1; }
cd "$work"
bash -euo pipefail billing.sh > billing.out 2> billing.err || { echo "FAIL: billing example"; cat billing.out billing.err; exit 1; }
cat billing.out
# The admin block drains and resumes; its exit codes must all be 0.
export PATH="$build:$PATH"
bash -euo pipefail admin.sh > admin.out 2> admin.err || { echo "FAIL: admin example"; cat admin.out admin.err; exit 1; }
cat admin.out

fail=0
# The block captured billing-demo's key; read its report as admin, and use
# another tenant's key for the refusal checks below.
export ORRERY_API_KEY=$("$build/orrery" admin tenant create billing-check 2> /dev/null)
"$build/orrery" --json admin billing report --tenant billing-demo > report.json
/usr/bin/python3 - report.json <<'PY' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))
lines = r["lines"]
ids = [l["request_id"] for l in lines]
assert len(lines) == 2, ids                      # order-1001 twice = billed once, plus one server id
assert ids.count("order-1001") == 1, ids
assert any(i.startswith("r_") for i in ids), ids
total = sum(int(l["cost_micros"]) for l in lines)
for l in lines:
    assert l["status"] == "OK", l
    assert int(l["cost_micros"]) == (int(l["lane_ns"]) * 50000 + 500000000) // 1000000000, l
assert total == int(r["total_cost_micros"]) == int(r["counter_cost_micros"]), r
assert total == sum(int(a["cost_micros"]) for a in r["by_model"]) == sum(int(a["cost_micros"]) for a in r["by_day"])
assert r["prices"]["currency"] == "EUR"
print("billing report reconciles:", len(lines), "lines,", total, "micros")
PY
grep -q '^record,tenant_id,day,model' billing.out || { echo "FAIL: csv header missing"; fail=1; }
grep -q '^TOTAL 2 entries' billing.out || { echo "FAIL: table total"; fail=1; }
grep -q 'drained: no inference in flight' admin.out || { echo "FAIL: drain"; fail=1; }
grep -q '"draining":false' admin.out || { echo "FAIL: resume did not clear draining"; fail=1; }
grep -q '"version":' admin.out || { echo "FAIL: server info json"; fail=1; }
# A tenant key cannot run the admin report.
if "$build/orrery" --admin-token "$ORRERY_API_KEY" admin billing report 2> e1; then echo "FAIL: tenant key ran admin report"; fail=1; fi
grep -q PERMISSION_DENIED e1 || { echo "FAIL: not PERMISSION_DENIED"; cat e1; fail=1; }
if "$build/orrery" billing report --format xml 2> e2; then echo "FAIL: bad format accepted"; fail=1; fi
grep -q "table, csv or json" e2 || { echo "FAIL: bad format message"; cat e2; fail=1; }

[ $fail -eq 0 ] && echo "cli billing: PASS"
exit $fail
