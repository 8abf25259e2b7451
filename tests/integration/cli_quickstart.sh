#!/usr/bin/env bash
# Runs the README quickstart verbatim through the real orrery CLI against a
# real orreryd (temp data dir, free loopback port), then checks its results.
# Usage: cli_quickstart.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
source "$src/tests/integration/cli_lib.sh"
cli_work quickstart
# The quickstart runs from a checkout with build/ and tests/ beside it.
cli_link_checkout "$src" "$build"
cli_start_orreryd "$build" --data-dir "$work/orrery-data"

# The block between the quickstart markers in README.md.
cli_doc_block "$src/README.md" quickstart > "$work/quickstart.sh"
[ -s "$work/quickstart.sh" ] || { echo "FAIL: no quickstart block in README.md"; exit 1; }
echo "--- running the README quickstart:"; cat "$work/quickstart.sh"; echo "---"

cd "$work"
bash -euo pipefail "$work/quickstart.sh" > "$work/out.log" 2> "$work/err.log" || {
  echo "FAIL: quickstart exited non-zero"; cat "$work/out.log" "$work/err.log"; exit 1; }
cat "$work/out.log"

fail=0
check() { if ! grep -q -- "$1" "$work/out.log"; then echo "FAIL: output lacks '$1'"; fail=1; fi; }
check "uploaded mlp version 1"
check "probs  FP32  \[2, 8\]"
check '"model_name":"mlp"'

# The output written by --output-dir equals numpy's expected output.
/usr/bin/python3 - "$work/quickstart/out/probs.pb" "$work/quickstart/mlp/test_data_set_0/output_0.pb" <<'PY' || fail=1
import sys, warnings
import numpy as np
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for a, t in (("float", float), ("int", int), ("bool", bool), ("object", object)):
        if not hasattr(np, a): setattr(np, a, t)
import onnx
from onnx import numpy_helper
def load(p):
    t = onnx.TensorProto(); t.ParseFromString(open(p, "rb").read()); return numpy_helper.to_array(t)
got, want = load(sys.argv[1]), load(sys.argv[2])
assert got.shape == want.shape, (got.shape, want.shape)
assert np.allclose(got, want, atol=1e-5), np.abs(got - want).max()
print("output matches numpy:", got.shape)
PY

# Error paths through the CLI: bad key, unknown model, unsupported op.
export ORRERY_API_KEY=ork_not_a_key
if "$build/orrery" model list 2> "$work/e1"; then echo "FAIL: bad key accepted"; fail=1; fi
grep -q UNAUTHENTICATED "$work/e1" || { echo "FAIL: bad key not UNAUTHENTICATED"; cat "$work/e1"; fail=1; }
export ORRERY_API_KEY=$(ORRERY_DATA_DIR="$work/orrery-data" "$build/orrery" admin tenant create other)
if "$build/orrery" infer mlp --input x=quickstart/mlp/test_data_set_0/input_0.pb 2> "$work/e2"; then
  echo "FAIL: other tenant could run acme's model"; fail=1; fi
grep -q NOT_FOUND "$work/e2" || { echo "FAIL: cross-tenant infer not NOT_FOUND"; cat "$work/e2"; fail=1; }
if "$build/orrery" model upload det quickstart/unsupported/model.onnx 2> "$work/e3"; then
  echo "FAIL: unsupported op accepted"; fail=1; fi
grep -q "INVALID_ARGUMENT.*Det" "$work/e3" || { echo "FAIL: unsupported op message"; cat "$work/e3"; fail=1; }
"$build/orrery" --json model list | grep -q '"models"' || { echo "FAIL: --json model list"; fail=1; }

[ $fail -eq 0 ] && echo "cli quickstart: PASS"
exit $fail
