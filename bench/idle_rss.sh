#!/usr/bin/env bash
# Resident memory of an idle orreryd: starts BUILD_DIR/orreryd (default
# build) on a loopback port with a temp data dir and any extra arguments
# (tests/integration/cli_lib.sh), waits until it serves, then SETTLE seconds
# (default 2), and prints one line of JSON: Rss / Pss / Anonymous /
# file-backed kB (/proc/PID/smaps_rollup), the number of shared objects
# mapped and those of CUDA (cudart, cuBLAS, cuDNN, libcuda, the module).
# With LIBS=1 it also prints every mapped shared object with its resident
# kB, largest first. Usage: bench/idle_rss.sh [BUILD_DIR] [-- ARGS...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../tests/integration/cli_lib.sh
source "$root/tests/integration/cli_lib.sh"
build=${1:-build}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
cli_work idle-rss
cli_start_orreryd "$build" --data-dir "$work/data" "$@" >"$work/log"
pid=$server_pid
sleep "${SETTLE:-2}"
kb() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$pid/smaps_rollup"; }
anon=$(kb Anonymous)
rss=$(kb Rss)
libs=$(awk '$6 ~ /\.so/ {print $6}' "/proc/$pid/maps" | sort -u)
cuda=$( (grep -E 'lib(cudart|cublas|cublasLt|cudnn[a-z_]*|cuda|orrery_cuda)\.so' <<<"$libs" || true) |
  xargs -rn1 basename | paste -sd, -)
printf '{"orreryd": "%s", "rss_kb": %s, "pss_kb": %s, "anon_kb": %s, "file_kb": %s, "shared_objects": %s, "cuda_objects": "%s"}\n' \
  "$build/orreryd" "$rss" "$(kb Pss)" "$anon" "$((rss - anon))" "$(wc -l <<<"$libs")" "$cuda"
if [ "${LIBS:-0}" = 1 ]; then
  # Resident kB per mapped file (smaps: one block per mapping).
  awk '/^[0-9a-f]+-[0-9a-f]+ / {f = $6} /^Rss:/ && f ~ /\.so/ {r[f] += $2} END {for (f in r) print r[f], f}' \
    "/proc/$pid/smaps" | sort -rn
fi
