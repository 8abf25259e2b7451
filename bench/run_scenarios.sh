#!/usr/bin/env bash
# The issue-6 load scenarios against a real orreryd, one command:
#   bench/run_scenarios.sh [--only 1,2,...] [--seconds S]
# Installs what is missing (scripts/loadgen-deps: matplotlib, onnx, numpy),
# writes the scenario models (bench/loadgen/make_models.py), measures capacity,
# runs each scenario with orrery-loadgen (each run starts its own orreryd),
# prints PASS/FAIL/SKIP per target and replaces the block between
# <!-- scenarios:begin --> and <!-- scenarios:end --> in docs/benchmarks.md.
# Exits 1 when a target fails. Takes a few minutes.
# Environment:
#   ORRERY_BUILD_DIR       build dir holding orreryd, orrery-loadgen, orrery-echo
#                          (default: build; a Release build)
#   ORRERY_SCENARIO_OUT    results: CSVs, JSON, PNGs (default: /tmp/orrery-scenarios)
#   ORRERY_BENCH_DOC       report path (default: docs/benchmarks.md; "" = none)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${ORRERY_BUILD_DIR:-$root/build}
out=${ORRERY_SCENARIO_OUT:-/tmp/orrery-scenarios}
doc=${ORRERY_BENCH_DOC-$root/docs/benchmarks.md}
for b in orreryd orrery-loadgen orrery-echo; do
  if [ ! -x "$build/$b" ]; then
    echo "no $build/$b: build it first (ninja -C $build orreryd orrery-loadgen orrery-echo cpu_jitter) or set ORRERY_BUILD_DIR" >&2
    exit 2
  fi
done
"$root/scripts/loadgen-deps"
mkdir -p "$out"
/usr/bin/python3 "$root/bench/loadgen/make_models.py" "$out/models" > /dev/null
exec /usr/bin/python3 "$root/bench/loadgen/scenarios.py" --build "$build" --models "$out/models" --out "$out" \
  --doc "$doc" --command "bench/run_scenarios.sh $*" "$@"
