#!/usr/bin/env bash
# orreryd --device: a bad value is refused naming the flag; `--device cuda:0`
# on a machine without a GPU (or a build without CUDA) logs why and serves
# CPU-only; with a GPU it logs the opened device instead.
# Usage: device_flag.sh BUILD_DIR
set -euo pipefail
build=$1
dir=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT

if "$build/orreryd" --data-dir "$dir/bad" --device gpu >"$dir/bad.log" 2>&1; then
  echo "FAIL: --device gpu was accepted"; exit 1
fi
grep -q -- "--device: expected cpu, auto, cuda or cuda:N, got 'gpu'" "$dir/bad.log" ||
  { echo "FAIL: no message naming --device:"; cat "$dir/bad.log"; exit 1; }

"$build/orreryd" --data-dir "$dir/data" --listen 127.0.0.1:0 --port-file "$dir/port" \
  --metrics-listen 127.0.0.1:0 --device cuda:0 >"$dir/log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do
  [ -s "$dir/port" ] && break
  kill -0 "$pid" 2>/dev/null || { echo "FAIL: orreryd exited"; cat "$dir/log"; exit 1; }
  sleep 0.1
done
[ -s "$dir/port" ] || { echo "FAIL: orreryd did not start"; cat "$dir/log"; exit 1; }
if grep -q "continuing CPU-only" "$dir/log"; then
  grep -q "no CUDA device" "$dir/log" || { echo "FAIL: reason not logged"; cat "$dir/log"; exit 1; }
  echo "no GPU here: orreryd logged it and serves CPU-only"
else
  grep -q "device: CUDA device 0" "$dir/log" || { echo "FAIL: neither message"; cat "$dir/log"; exit 1; }
  echo "GPU found: orreryd opened it"
fi
kill "$pid"
wait "$pid"
pid=
