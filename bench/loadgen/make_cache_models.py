#!/usr/bin/python3
"""Writes the many small models of the cache scenarios (bench/run_cache_scenarios.sh).

    /usr/bin/python3 bench/loadgen/make_cache_models.py OUT_DIR [COUNT] [MIN_MIB] [MAX_MIB]

OUT_DIR/m0000.onnx ... : COUNT (default 1000) two-layer MLPs built with
onnx.helper, input x [N, 256] (dynamic batch), Gemm 256->H + Relu, Gemm
H->16; H is drawn so that the weights take MIN_MIB..MAX_MIB (default 1..2)
MiB, log-uniform, seed 0. Every model has its own random weights. Skips the
files that already exist with the same parameters (OUT_DIR/params.txt), so a
second run costs nothing. Prints the total weight bytes.
"""
import os
import sys

import numpy as np

np.float = float
np.int = int
np.bool = bool
np.object = object
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

IN, OUT = 256, 16


def model(path, hidden, rng):
    w1 = rng.standard_normal((IN, hidden), dtype=np.float32) * np.float32(np.sqrt(2.0 / IN))
    w2 = rng.standard_normal((hidden, OUT), dtype=np.float32) * np.float32(np.sqrt(2.0 / hidden))
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(np.zeros(hidden, np.float32), "b1"),
             numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(np.zeros(OUT, np.float32), "b2")]
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["y"])]
    graph = helper.make_graph(nodes, "cache_mlp",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", IN])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", OUT])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="orrery-bench")
    m.ir_version = 8
    onnx.save(m, path)
    return 4 * (IN * hidden + hidden + hidden * OUT + OUT)


def main():
    out = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    lo = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    hi = float(sys.argv[4]) if len(sys.argv) > 4 else 2.0
    os.makedirs(out, exist_ok=True)
    params = f"{count} {lo} {hi}\n"
    stamp = os.path.join(out, "params.txt")
    fresh = not os.path.exists(stamp) or open(stamp).read() != params
    rng = np.random.default_rng(0)
    per_unit = 4 * (IN + 1 + OUT)  # weight bytes per hidden unit
    total = 0
    for i in range(count):
        mib = float(np.exp(rng.uniform(np.log(lo), np.log(hi))))
        hidden = max(8, int(mib * (1 << 20) / per_unit))
        path = os.path.join(out, f"m{i:04d}.onnx")
        if fresh or not os.path.exists(path):
            total += model(path, hidden, np.random.default_rng(i + 1))
        else:
            total += 4 * (IN * hidden + hidden + hidden * OUT + OUT)
    with open(stamp, "w") as f:
        f.write(params)
    print(total)


if __name__ == "__main__":
    main()
