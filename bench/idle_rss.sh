#!/usr/bin/env bash
# Resident memory of an idle orreryd: starts ORRERYD (default build/orreryd)
# on a loopback port with a temp data dir and any extra arguments, waits
# until it serves, then SETTLE seconds (default 2), and prints one line of
# JSON: Rss / Pss / Anonymous / file-backed kB (/proc/PID/smaps_rollup), the
# number of shared objects mapped and those of CUDA (cudart, cuBLAS, cuDNN,
# libcuda). With LIBS=1 it also prints every mapped shared object with its
# resident kB, largest first. Usage: bench/idle_rss.sh [ORRERYD] [-- ARGS...]
set -euo pipefail
bin=${1:-build/orreryd}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
dir=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
"$bin" --data-dir "$dir/data" --listen 127.0.0.1:0 --port-file "$dir/port" "$@" >"$dir/log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do
  [ -s "$dir/port" ] && break
  kill -0 "$pid" 2>/dev/null || { echo "orreryd exited:" >&2; cat "$dir/log" >&2; exit 1; }
  sleep 0.1
done
[ -s "$dir/port" ] || { echo "orreryd did not start" >&2; cat "$dir/log" >&2; exit 1; }
sleep "${SETTLE:-2}"
kb() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$pid/smaps_rollup"; }
anon=$(kb Anonymous)
rss=$(kb Rss)
libs=$(awk '$6 ~ /\.so/ {print $6}' "/proc/$pid/maps" | sort -u)
cuda=$( (grep -E 'lib(cudart|cublas|cublasLt|cudnn[a-z_]*|cuda|orrery_cuda)\.so' <<<"$libs" || true) | xargs -rn1 basename | paste -sd, -)
printf '{"binary": "%s", "rss_kb": %s, "pss_kb": %s, "anon_kb": %s, "file_kb": %s, "shared_objects": %s, "cuda_objects": "%s"}\n' \
  "$bin" "$rss" "$(kb Pss)" "$anon" "$((rss - anon))" "$(wc -l <<<"$libs")" "$cuda"
if [ "${LIBS:-0}" = 1 ]; then
  # Resident kB per mapped file (smaps: one block per mapping).
  awk '/^[0-9a-f]+-[0-9a-f]+ / {f = $6} /^Rss:/ && f ~ /\.so/ {r[f] += $2} END {for (f in r) print r[f], f}' \
    "/proc/$pid/smaps" | sort -rn
fi
