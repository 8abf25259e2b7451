#!/usr/bin/env bash
# `orrery admin ...` and the versioned model commands through the real CLI
# against a real orreryd: tenant create/show/update/disable/enable/delete,
# key create/list/revoke, upload ids, --json output parsed with python.
# Usage: cli_admin.sh BUILD_DIR MODELS_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
models=$(cd "$2" && pwd)
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
cli_work cli-admin
cli_start_orreryd "$build" --data-dir "$work/data"
export ORRERY_DATA_DIR="$work/data"
orrery() { "$build/orrery" "$@"; }
json() { /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }
fail=0
expect() { if [ "$1" != "$2" ]; then echo "FAIL: $3: got '$1', want '$2'"; fail=1; fi; }

key=$(orrery admin tenant create acme --display-name "Acme Corp" --max-models 2 --weight 3)
expect "$(orrery --json admin tenant show acme | json "d['tenant']['display_name']")" "Acme Corp" "display name"
expect "$(orrery --json admin tenant show acme | json "d['tenant']['quotas']['max_models']")" "2" "max_models"
expect "$(orrery --json admin tenant show acme | json "d['tenant']['quotas']['max_inflight_requests']")" "64" \
  "default max_inflight_requests"
orrery --json admin tenant update acme --weight 5 --max-models 4 > /dev/null
expect "$(orrery --json admin tenant show acme | json "d['tenant']['weight']")" "5" "updated weight"
expect "$(orrery --json admin tenant show acme | json "d['tenant']['display_name']")" "Acme Corp" "display name kept"

# Keys: a second one, listed by id and prefix only, then revoked.
key2=$(orrery admin key create acme)
list=$(orrery --json admin key list acme)
expect "$(echo "$list" | json "len(d['keys'])")" "2" "two keys"
case "$list" in *"$key"*|*"$key2"*) echo "FAIL: key list shows a secret"; fail=1 ;; esac
key2_id=$(echo "$list" | json "[k['key_id'] for k in d['keys'] if '$key2'.startswith(k['prefix'])][0]")
ORRERY_API_KEY=$key2 orrery model list > /dev/null
orrery admin key revoke acme "$key2_id" > /dev/null
if ORRERY_API_KEY=$key2 orrery model list 2> "$work/e1"; then echo "FAIL: revoked key works"; fail=1; fi
grep -q UNAUTHENTICATED "$work/e1" || { echo "FAIL: revoked key not UNAUTHENTICATED"; fail=1; }

# Upload ids and versions.
export ORRERY_API_KEY=$key
v1=$(orrery --json model upload mlp "$models/mlp/model.onnx" --upload-id first | json "d['model']['version']")
again=$(orrery --json model upload mlp "$models/mlp/model.onnx" --upload-id first | json "d['replayed']")
v2=$(orrery --json model upload mlp "$models/mlp/model.onnx" | json "d['model']['version']")
expect "$v1 $again $v2" "1 True 2" "upload id replay and versions"
expect "$(orrery --json model show mlp --version 1 | json "d['model']['upload_id']")" "first" "show --version"
expect "$(orrery --json model delete mlp --version 2 | json "d['versions']")" "[2]" "delete one version"
expect "$(orrery --json model show mlp | json "d['model']['version']")" "1" "latest after delete"

# Disable, enable, delete.
orrery admin tenant disable acme > /dev/null
if orrery model list 2> "$work/e2"; then echo "FAIL: disabled tenant works"; fail=1; fi
grep -q UNAUTHENTICATED "$work/e2" || { echo "FAIL: disabled tenant not UNAUTHENTICATED"; fail=1; }
orrery admin tenant enable acme > /dev/null
orrery model list > /dev/null
if orrery --admin-token "$key" admin tenant list 2> "$work/e3"; then echo "FAIL: tenant key ran an admin command"; fail=1; fi
grep -q PERMISSION_DENIED "$work/e3" || { echo "FAIL: tenant key on admin not PERMISSION_DENIED"; fail=1; }
# A token with a newline (e.g. from `$(ls dir)`) is refused by the CLI with
# the byte named; gRPC would abort the process on it.
rc=0
orrery --admin-token "$(printf 'abc\ndef')" admin tenant list 2> "$work/e5" || rc=$?
[ $rc -eq 1 ] || { echo "FAIL: token with a newline exited $rc, want 1"; fail=1; }
grep -q "byte 0x0a at position 3" "$work/e5" || { echo "FAIL: token with a newline: $(cat "$work/e5")"; fail=1; }
orrery admin tenant delete acme > /dev/null
if orrery admin tenant show acme 2> "$work/e4"; then echo "FAIL: deleted tenant shown"; fail=1; fi
grep -q NOT_FOUND "$work/e4" || { echo "FAIL: deleted tenant not NOT_FOUND"; fail=1; }

[ $fail -eq 0 ] && echo "cli admin: PASS"
exit $fail
