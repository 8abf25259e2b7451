# Shared by the cli_*.sh integration tests (sourced): a temp work dir that is
# removed on exit, a real orreryd on a free loopback port, and the bash
# blocks of the docs that the tests run verbatim.
#   cli_work NAME          -> $work (mktemp), cleanup trap (stops orreryd)
#   cli_link_checkout SRC BUILD -> $work/build and $work/tests, as in a checkout
#   cli_start_orreryd BUILD ARGS... -> starts orreryd with --data-dir
#       $work/<dir> given in ARGS, waits for its port, exports ORRERY_SERVER
#       and clears the client's key, token and data-dir variables
#   cli_doc_block FILE MARKER -> the ```bash block between
#       <!-- MARKER:begin --> and <!-- MARKER:end --> in FILE

cli_work() {
  work=$(mktemp -d "/tmp/orrery-$1-XXXXXX")
  server_pid=""
  trap cli_cleanup EXIT
}

cli_cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}

cli_link_checkout() {
  ln -s "$2" "$work/build"
  ln -s "$1/tests" "$work/tests"
}

cli_start_orreryd() {
  local bin=$1
  shift
  "$bin/orreryd" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --port-file "$work/port" --log-level warn "$@" &
  server_pid=$!
  for _ in $(seq 1 600); do [ -s "$work/port" ] && break; sleep 0.1; done
  [ -s "$work/port" ] || { echo "FAIL: orreryd did not start" >&2; exit 1; }
  ORRERY_SERVER=$(cat "$work/port")
  export ORRERY_SERVER
  unset ORRERY_API_KEY ORRERY_ADMIN_TOKEN ORRERY_DATA_DIR
}

cli_doc_block() {
  sed -n "/<!-- $2:begin -->/,/<!-- $2:end -->/p" "$1" | sed -n '/^```bash$/,/^```$/p' | grep -v '^```'
}
