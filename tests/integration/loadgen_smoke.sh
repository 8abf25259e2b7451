#!/usr/bin/env bash
# orrery-loadgen against an orreryd it starts itself, for a couple of seconds:
# two tenants (weights 1 and 3) on the test MLP, one open-loop Poisson stream
# with a deadline, one closed-loop stream and a trace file of 40 arrivals for a
# third tenant (30 of them in the measured window). Checks that it exits 0, that the
# per-request CSV has one row per request sent with known outcomes, that the
# per-tenant counts add up and that the server reported execution times and
# scheduler service; that --echo-rounds pools both sides over its rounds; and
# that a malformed stream is refused by name.
# Usage: loadgen_smoke.sh BUILD_DIR MODELS_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
models=$(cd "$2" && pwd)
work=$(mktemp -d /tmp/orrery-loadgen-smoke-XXXXXX)
trap 'rm -rf "$work"' EXIT
{
  echo "time_s,tenant,model,deadline_ms"
  for i in $(seq 0 39); do echo "$(awk "BEGIN{print $i * 0.05 + 0.01}"),traced,mlp,1000"; done
} > "$work/trace.csv"

"$build/orrery-loadgen" --orreryd "$build/orreryd" --model "mlp=$models/mlp/model.onnx" \
  --tenant small:1 --tenant big:3 --stream small:mlp:200:1000 --stream big:mlp:c2 \
  --trace "$work/trace.csv" --duration 2 --warmup 0.5 --csv "$work/req.csv" --summary-csv "$work/sum.csv" --json "$work/sum.json" \
  --client-cpus 0 --orreryd-arg=--serving-cpus=0 --orreryd-arg=--lane-cpus=$(( $(nproc) - 1 )) \
  > "$work/out.txt"
cat "$work/out.txt"

/usr/bin/python3 - "$work" <<'PY'
import csv, json, sys
work = sys.argv[1]
reqs = list(csv.DictReader(open(f"{work}/req.csv")))
summ = {r["tenant"]: r for r in csv.DictReader(open(f"{work}/sum.csv"))}
js = json.load(open(f"{work}/sum.json"))
fails = []
def check(cond, what):
    if not cond:
        fails.append(what)
check(set(summ) == {"small", "big", "traced", "all"}, f"summary tenants {sorted(summ)}")
# Trace arrivals at 0.01 + 0.05 i s: i = 10..39 fall in the window [0.5, 2.5).
check(int(summ["traced"]["sent"]) == 30, f"traced sent {summ['traced']['sent']}, want 30")
check(all(r["deadline_ms"] == "1000" for r in reqs if r["tenant"] == "traced"), "trace deadline")
check(int(summ["all"]["sent"]) == len(reqs), f"sent {summ['all']['sent']} != CSV rows {len(reqs)}")
for t in ("small", "big", "traced"):
    s = summ[t]
    parts = sum(int(s[k]) for k in ("ok", "rejected_early", "rejected_late", "errors"))
    check(int(s["sent"]) == parts, f"{t}: sent {s['sent']} != ok + rejected + errors {parts}")
    check(int(s["ok"]) > 0, f"{t}: no OK responses")
    check(int(s["errors"]) == 0, f"{t}: {s['errors']} errors")
    check(int(s["service_ns"]) > 0, f"{t}: no service from the scheduler stats")
    check(0 < float(s["p50_ms"]) <= float(s["p99_ms"]) <= float(s["p999_ms"]), f"{t}: percentiles out of order")
# 200/s Poisson for 2 s: far from 0 and from 1000.
small = [r for r in reqs if r["tenant"] == "small"]
check(150 < len(small) < 700, f"small sent {len(small)} in 2 s at 200/s")
check(all(r["outcome"] in ("ok", "late", "rejected_early", "rejected_late") for r in reqs), "unknown outcome")
ok = [r for r in reqs if r["outcome"] == "ok"]
check(all(r["lane_ms"] and float(r["lane_ms"]) > 0 for r in ok), "OK response without orrery_lane_ns")
check(all(float(r["lane_ms"]) <= float(r["latency_ms"]) for r in ok), "execution longer than the round trip")
check(all(r["server_ms"] and float(r["lane_ms"]) + float(r["queue_ms"]) <= float(r["server_ms"]) <= float(r["latency_ms"])
          for r in ok), "orrery_server_ns missing or not between queue + execution and the round trip")
# Calibration at upload runs while the load starts: later requests at least
# carry the scheduler's prediction.
check(any(r["predicted_lane_ms"] and float(r["predicted_lane_ms"]) > 0 for r in ok), "no orrery_predicted_lane_ns")
check(0 < js["jain_index"] <= 1, f"Jain's index {js['jain_index']}")
check(js["total"]["sent"] == len(reqs), "JSON total")
check(all(float(r["send_lag_ms"]) >= 0 for r in reqs), "negative send lag")
# The handler's arrival stamp splits gRPC and the network: both ways
# non-negative, and lag + request path + server + response path is the
# latency (each written with 6 significant digits).
check(all(r["request_path_ms"] and r["response_path_ms"] for r in ok), "OK response without orrery_arrival_steady_ns")
check(all(float(r["request_path_ms"]) >= 0 and float(r["response_path_ms"]) >= 0 for r in ok), "negative path")
check(all(abs(sum(float(r[k]) for k in ("send_lag_ms", "request_path_ms", "server_ms", "response_path_ms")) -
              float(r["latency_ms"])) < 1e-3 + 1e-4 * float(r["latency_ms"]) for r in ok),
      "lag + paths + server != latency")
if fails:
    print("FAIL:", *fails, sep="\n  ")
    sys.exit(1)
print(f"ok: {len(reqs)} requests")
PY

# The echo comparison in alternated rounds (scenario 7): both sides measured
# in every round, pooled.
"$build/orrery-echo" --listen 127.0.0.1:0 --port-file "$work/echo.port" --api callback > /dev/null &
echo_pid=$!
trap 'kill $echo_pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -s "$work/echo.port" ] && break; sleep 0.05; done
"$build/orrery-loadgen" --orreryd "$build/orreryd" --model "mlp=$models/mlp/model.onnx" --stream a:mlp:200 \
  --duration 1 --warmup 0.2 --echo "$(cat "$work/echo.port")" --echo-rounds 2 --json "$work/echo.json" \
  > "$work/echo.txt"
/usr/bin/python3 - "$work/echo.json" <<'PY'
import json, sys
js = json.load(open(sys.argv[1]))
fails = []
if js["echo_rounds"] != 2: fails.append(f"echo_rounds {js['echo_rounds']}, want 2")
if not 0 < js["rounds_overhead_p50_ms"] < 1000: fails.append(f"rounds overhead p50 {js['rounds_overhead_p50_ms']}")
if len(js["echoes"]) != 1 or not 0 < js["echo_p50_ms"] == js["echoes"][0]["p50_ms"]: fails.append(f"echoes {js['echoes']}")
if fails:
    print("FAIL:", *fails, sep="\n  ")
    sys.exit(1)
PY
grep -q "over 2 alternated rounds" "$work/echo.txt" || { echo "FAIL: no rounds line:"; cat "$work/echo.txt"; exit 1; }

if "$build/orrery-loadgen" --orreryd "$build/orreryd" --model "mlp=$models/mlp/model.onnx" \
     --stream small:mlp:fast > "$work/bad.txt" 2>&1; then
  echo "FAIL: a malformed --stream was accepted"; exit 1
fi
grep -q "rate 'fast' is not a positive number" "$work/bad.txt" || { echo "FAIL: message:"; cat "$work/bad.txt"; exit 1; }
echo PASS
