#!/usr/bin/env bash
# The issue-7 host-cache and device scenarios against a real orreryd, one command:
#   bench/run_cache_scenarios.sh [--only 1,2,3,4] [--seconds S] [--s3-seconds S] [--count N] [--cold-cycles N]
#                                [--s1-policies keepalive,no_keepalive,lru] [--s1-capacity REQ_PER_S]
# S1 many models (1,000 MLPs over 50 tenants, Zipf, 70% of the capacity on
# that same workload -- a ramp of its trace to overload, the best goodput
# of a step --, 100 ms deadlines; keep-alive on / off / LRU), S2 cold start of ResNet-50 (vs disk
# bandwidth + one inference, and vs ONNX Runtime), S3 the simulated
# accelerator (--sim-device, a device cache smaller than the working set:
# link and device utilisation, their overlap, misses caused by unplanned
# transfers), S4 peak RSS while cycling the 1,000 models. Writes the models
# (bench/loadgen/make_cache_models.py, ~1.5 GB, kept between runs), runs
# bench/loadgen/cache_scenarios.py, prints PASS/FAIL/SKIP per target and
# rewrites the block between <!-- cache-scenarios:begin --> and
# <!-- cache-scenarios:end --> in docs/benchmarks.md; with --only, the rows
# and sections of the scenarios not run are kept as they were. Exits 1 when
# a target fails. Takes ~7 minutes (S1 alone ~3.5, S3 ~1).
# Needs: ninja -C build orreryd orrery-loadgen; S2 needs the ResNet-50 export
# and onnxruntime-node (bench/run_real_models.sh / scripts/bench-deps).
# Environment:
#   ORRERY_BUILD_DIR     build dir holding orreryd and orrery-loadgen (default: build, Release)
#   ORRERY_CACHE_OUT     models and results (default: /tmp/orrery-cache-scenarios)
#   ORRERY_BENCH_DOC     report path (default: docs/benchmarks.md; "" = none)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${ORRERY_BUILD_DIR:-$root/build}
out=${ORRERY_CACHE_OUT:-/tmp/orrery-cache-scenarios}
doc=${ORRERY_BENCH_DOC-$root/docs/benchmarks.md}
for b in orreryd orrery-loadgen; do
  if [ ! -x "$build/$b" ]; then
    echo "no $build/$b: build it first (ninja -C $build orreryd orrery-loadgen) or set ORRERY_BUILD_DIR" >&2
    exit 2
  fi
done
"$root/scripts/loadgen-deps"
mkdir -p "$out"
exec /usr/bin/python3 "$root/bench/loadgen/cache_scenarios.py" --build "$build" --out "$out" --doc "$doc" \
  --command "bench/run_cache_scenarios.sh $*" "$@"
