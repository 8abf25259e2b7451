#!/usr/bin/env bash
# `orrery admin cache ...` through the real CLI against a real orreryd: runs
# the cache example of docs/operations.md verbatim, then checks
# `orrery --json admin cache list` (states, sizes, pins, last use), that an
# evicted model's next request is billed the bytes it loaded at the price
# table's gb_loaded_micros and a hit 0, and the refusals (tenant key:
# PERMISSION_DENIED; unknown model / tenant: NOT_FOUND; evicting a pinned
# model: FAILED_PRECONDITION).
# Usage: cli_cache.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
source "$src/tests/integration/cli_lib.sh"
cli_work cli-cache
cli_link_checkout "$src" "$build"

# 2 micros per byte loaded, lane time free: a line costs 2 x bytes_loaded.
echo '{"lane_second_micros": 0, "gb_loaded_micros": 2000000000}' > "$work/prices.json"
cli_start_orreryd "$build" --data-dir "$work/orrery-data" --price-table "$work/prices.json" --host-cache-bytes 60000

cli_doc_block "$src/docs/operations.md" cache-example > "$work/cache.sh"
[ -s "$work/cache.sh" ] || { echo "FAIL: cache-example block missing in docs/operations.md"; exit 1; }
cd "$work"
bash -euo pipefail cache.sh > cache.out 2> cache.err || { echo "FAIL: cache example"; cat cache.out cache.err; exit 1; }
cat cache.out

orrery() { "$build/orrery" "$@"; }
fail=0
expect() { if [ "$1" != "$2" ]; then echo "FAIL: $3: got '$1', want '$2'"; fail=1; fi; }
json() { /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }

# The example's last command: the version it prefetched is resident, unpinned.
tail -n 1 cache.out > example.json
expect "$(json "[e['state'] for e in d['entries'] if e['model'] == 'mlp'][0]" < example.json)" "resident" \
  "example: prefetched version resident"
grep -q '^TIER' cache.out || { echo "FAIL: table header of cache list"; fail=1; }
grep -q 'host tier:' cache.out || { echo "FAIL: tier summary of cache list"; fail=1; }

# The example billed cold-1 for its load, warm-1 for none.
export ORRERY_API_KEY=$(orrery admin tenant create cache-check 2> /dev/null)
orrery --json admin billing report --tenant cache-demo > demo.json
/usr/bin/python3 - demo.json <<'PY' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))
lines = {l["request_id"]: l for l in r["lines"]}
assert int(lines["cold-1"].get("bytes_loaded", 0)) == 20480, lines["cold-1"]
assert int(lines["cold-1"]["cost_micros"]) == 2 * 20480, lines["cold-1"]
assert int(lines["warm-1"].get("bytes_loaded", 0)) == 0, lines["warm-1"]
assert int(lines["warm-1"].get("cost_micros", 0)) == 0, lines["warm-1"]
assert int(r["total_cost_micros"]) == int(r["counter_cost_micros"]) == 2 * 20480, r
print("cache example billed: cold-1", lines["cold-1"]["cost_micros"], "micros, warm-1 0")
PY

# A second tenant with two models. 60000 bytes hold two 24 KiB segments and
# each tenant's fair share is half, so uploading b evicts cache-check's own a.
model="$work/cache-models/mlp/model.onnx"
orrery model upload a "$model" > /dev/null
orrery model upload b "$model" > /dev/null
orrery --json admin cache list --tenant cache-check > list.json
/usr/bin/python3 - list.json <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
assert [t["tier"] for t in d["tiers"]] == ["host"], d["tiers"]
tier = d["tiers"][0]
assert int(tier["capacity_bytes"]) == 60000, tier
assert int(tier.get("used_bytes", 0)) <= 60000, tier
entries = {e["model"]: e for e in d["entries"]}
assert sorted(entries) == ["a", "b"], entries          # --tenant leaves cache-demo's out
for e in entries.values():
    assert e["tenant"] == "cache-check" and e["tier"] == "host", e
    assert int(e["size_bytes"]) == 20480, e
    assert int(e.get("pins", 0)) == 0, e
    assert int(e.get("last_use_unix_ms", 0)) == 0, e   # uploaded, never requested
assert entries["b"]["state"] == "resident", entries["b"]
assert entries["a"]["state"] == "absent", entries["a"]   # over its share: its own model went
print("cache list --json: b resident, a evicted, unpinned, unused")
PY
orrery --json admin cache list > all.json
expect "$(json "[e['state'] for e in d['entries'] if e['tenant'] == 'cache-demo'][0]" < all.json)" "resident" \
  "cache-demo's version kept (within its share)"

# Pin a: it stays resident while b and cache-demo's mlp take turns.
orrery admin cache pin cache-check a > /dev/null
expect "$(orrery --json admin cache list --tenant cache-check | json "[e['operator_pins'] for e in d['entries'] if e['model'] == 'a'][0]")" \
  "1" "operator pin listed"
input="$work/cache-models/mlp/test_data_set_0/input_0.pb"
demo_key=$(orrery admin key create cache-demo 2> /dev/null)
for i in 1 2 3; do
  orrery infer b --input "x=$input" > /dev/null
  "$build/orrery" --api-key "$demo_key" infer mlp --input "x=$input" > /dev/null
done
evictions=$(orrery --json admin cache list | json "d['tiers'][0]['evictions']")
[ "$evictions" -ge 4 ] || { echo "FAIL: no pressure: $evictions evictions"; fail=1; }
expect "$(orrery --json admin cache list --tenant cache-check | json "[e['state'] for e in d['entries'] if e['model'] == 'a'][0]")" \
  "resident" "pinned version survives pressure"
if orrery admin cache evict cache-check a 2> e1; then echo "FAIL: evicted a pinned version"; fail=1; fi
grep -q FAILED_PRECONDITION e1 || { echo "FAIL: evict pinned not FAILED_PRECONDITION"; cat e1; fail=1; }
orrery admin cache unpin cache-check a > /dev/null
orrery admin cache evict cache-check a > /dev/null
expect "$(orrery --json admin cache evict cache-check a | json "d['entry']['state']")" "absent" "evict json"

# Refusals.
if orrery --admin-token "$ORRERY_API_KEY" admin cache list 2> e2; then echo "FAIL: tenant key listed the cache"; fail=1; fi
grep -q PERMISSION_DENIED e2 || { echo "FAIL: tenant key not PERMISSION_DENIED"; cat e2; fail=1; }
if orrery admin cache pin cache-check nosuchmodel 2> e3; then echo "FAIL: pinned an unknown model"; fail=1; fi
grep -q "NOT_FOUND.*nosuchmodel" e3 || { echo "FAIL: unknown model not NOT_FOUND naming it"; cat e3; fail=1; }
if orrery admin cache prefetch nobody a 2> e4; then echo "FAIL: prefetched for an unknown tenant"; fail=1; fi
grep -q "NOT_FOUND.*nobody" e4 || { echo "FAIL: unknown tenant not NOT_FOUND naming it"; cat e4; fail=1; }
if orrery admin cache list --tier device 2> e5; then echo "FAIL: listed a device tier"; fail=1; fi
grep -q "NOT_FOUND" e5 || { echo "FAIL: device tier not NOT_FOUND"; cat e5; fail=1; }

[ $fail -eq 0 ] && echo "cli cache: PASS"
exit $fail
