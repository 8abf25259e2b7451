#!/usr/bin/env bash
# orreryd --device: a bad value is refused naming the flag; `--device cuda:0`
# on a machine without a GPU (or a build without CUDA) logs why and serves
# CPU-only, and without a CUDA driver maps no CUDA library (the backend is
# the module liborrery_cuda.so, loaded on demand: cache/cuda_backend.h);
# with a GPU it logs the opened device instead. When the module is built,
# it is also loaded past the driver check (ORRERY_CUDA_SKIP_DRIVER_CHECK),
# so a module whose symbols orreryd does not provide fails here.
# Usage: device_flag.sh BUILD_DIR HAVE_CUDA(ON|OFF)
set -euo pipefail
build=$1
have_cuda=$2
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

# start NAME ARGS...: orreryd with its own data dir, log in $dir/NAME.log,
# returns once it serves ($pid set).
start() {
  local name=$1
  shift
  "$build/orreryd" --data-dir "$dir/$name" --listen 127.0.0.1:0 --port-file "$dir/$name.port" \
    --metrics-listen 127.0.0.1:0 "$@" \
    >"$dir/$name.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do
    [ -s "$dir/$name.port" ] && return 0
    kill -0 "$pid" 2>/dev/null || { echo "FAIL: orreryd exited"; cat "$dir/$name.log"; exit 1; }
    sleep 0.1
  done
  echo "FAIL: orreryd did not start"; cat "$dir/$name.log"; exit 1
}
stop() {
  kill "$pid"
  wait "$pid"
  pid=
}
cuda_libs() { grep -oE 'lib(cudart|cublas|cublasLt|cudnn|orrery_cuda)\.so[.0-9]*' "/proc/$pid/maps" | sort -u | paste -sd, - || true; }
has_driver() { /sbin/ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; }

start cpu
[ -z "$(cuda_libs)" ] || { echo "FAIL: orreryd --device cpu mapped $(cuda_libs)"; exit 1; }
stop
echo "--device cpu: no CUDA library mapped"

start gpu --device cuda:0
if grep -q "continuing CPU-only" "$dir/gpu.log"; then
  grep -q "no CUDA device" "$dir/gpu.log" || { echo "FAIL: reason not logged"; cat "$dir/gpu.log"; exit 1; }
  if ! has_driver; then
    [ -z "$(cuda_libs)" ] || { echo "FAIL: no driver, yet orreryd mapped $(cuda_libs)"; exit 1; }
  fi
  echo "no GPU here: orreryd logged it and serves CPU-only ($(grep -o 'no CUDA device.*' "$dir/gpu.log"))"
else
  grep -q "device: CUDA device 0" "$dir/gpu.log" || { echo "FAIL: neither message"; cat "$dir/gpu.log"; exit 1; }
  echo "GPU found: orreryd opened it"
fi
stop

if [ "$have_cuda" = ON ]; then
  ORRERY_CUDA_SKIP_DRIVER_CHECK=1 start module --device cuda:0
  if grep -q "cannot load the CUDA backend\|has no orrery_cuda_backend\|from another build" "$dir/module.log"; then
    echo "FAIL: the CUDA module did not load:"; cat "$dir/module.log"; exit 1
  fi
  case "$(cuda_libs)" in
    *liborrery_cuda.so*) ;;
    *) echo "FAIL: liborrery_cuda.so is not mapped"; cat "$dir/module.log"; exit 1 ;;
  esac
  grep -q "no CUDA device\|device: CUDA device 0" "$dir/module.log" ||
    { echo "FAIL: no device message"; cat "$dir/module.log"; exit 1; }
  echo "the CUDA module loads into orreryd: $(cuda_libs)"
  stop
fi
