#!/usr/bin/env bash
# Real-model checks against ONNX Runtime. One command each:
#   bench/run_real_models.sh accuracy [MODEL ...]   issue 3: rel L2 <= 1e-4 vs ORT
#   bench/run_real_models.sh latency  [MODEL ...]   issue 4: writes docs/benchmarks.md
# Installs what is missing (scripts/bench-deps), exports the models once into a
# cache dir (kept between runs), then runs bench/compare_models.py.
# Environment:
#   ORRERY_BUILD_DIR      build dir holding orrery-run (default: build; a Release
#                         build for latency)
#   ORRERY_BENCH_MODELS   where exported models live (default: cache dir/models)
#   ORRERY_BENCH_THREADS  latency thread counts (default: 1,2)
#   ORRERY_BENCH_SECONDS  latency: approximate timed seconds per model and side (default: 10)
#   ORRERY_BENCH_DOC      latency report path (default: docs/benchmarks.md)
# Not part of ctest or CI: it needs torch and ~1 GiB of packages.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-}
case "$mode" in
  accuracy | latency) shift ;;
  *) echo "usage: bench/run_real_models.sh accuracy|latency [MODEL ...]" >&2; exit 2 ;;
esac

node_modules=$("$root/scripts/bench-deps" | tail -n1)
cache=$(dirname "$node_modules")
models=${ORRERY_BENCH_MODELS:-$cache/models}
build=${ORRERY_BUILD_DIR:-$root/build}
orrery_run="$build/orrery-run"
if [ ! -x "$orrery_run" ]; then
  echo "no $orrery_run: build it first (ninja -C $build orrery-run cpu_jitter cpu_pingpong) or set ORRERY_BUILD_DIR" >&2
  exit 2
fi

/usr/bin/python3 "$root/bench/export_models.py" "$models" "$@"

args=(--models "$models" --orrery-run "$orrery_run" --node-modules "$node_modules")
[ $# -gt 0 ] && args+=(--only "$@")
if [ "$mode" = accuracy ]; then
  exec /usr/bin/python3 "$root/bench/compare_models.py" accuracy "${args[@]}"
fi
exec /usr/bin/python3 "$root/bench/compare_models.py" latency "${args[@]}" \
  --threads "${ORRERY_BENCH_THREADS:-1,2}" \
  --target-seconds "${ORRERY_BENCH_SECONDS:-10}" \
  --doc "${ORRERY_BENCH_DOC:-$root/docs/benchmarks.md}" \
  --command "bench/run_real_models.sh latency${*:+ $*}"
