#!/usr/bin/env bash
# Runs a libFuzzer binary for a bounded time on a scratch copy of the seed
# corpus (every model.onnx and test-data .pb under MODELS_DIR).
# Usage: run_fuzzer.sh FUZZER MODELS_DIR SECONDS
set -euo pipefail
fuzzer=$1
models=$2
seconds=$3
work=$(mktemp -d /tmp/orrery-fuzz-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$work/artifacts"
i=0
while IFS= read -r f; do cp "$f" "$work/corpus/seed-$i"; i=$((i + 1)); done \
  < <(find "$models" -name '*.onnx' -o -name '*.pb' | sort)
[ "$i" -gt 0 ] || { echo "FAIL: no seeds under $models"; exit 1; }
echo "fuzzing for ${seconds}s from $i seeds"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# -rss_limit_mb: a model may legitimately compile a few hundred MB; more is a bug.
status=0
"$fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -max_len=65536 \
  -artifact_prefix="$work/artifacts/" -print_final_stats=1 "$work/corpus" > "$work/log" 2>&1 || status=$?
tail -60 "$work/log"
if ls "$work/artifacts"/* > /dev/null 2>&1; then
  echo "FAIL: fuzzer artifacts:"; ls -l "$work/artifacts"
  mkdir -p /tmp/orrery-fuzz-artifacts && cp "$work/artifacts"/* /tmp/orrery-fuzz-artifacts/
  echo "copied to /tmp/orrery-fuzz-artifacts"
  exit 1
fi
exit "$status"
