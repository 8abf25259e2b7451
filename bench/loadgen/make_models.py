#!/usr/bin/python3
"""Writes the small ONNX models the load scenarios use (bench/run_scenarios.sh).

    /usr/bin/python3 bench/loadgen/make_models.py OUT_DIR

OUT_DIR/<name>.onnx for:
  mlp       input x [1, 32, 256]: MatMul 256->512 + Relu, then 7 x (MatMul
            512x512 + Relu); about 17 MFLOP per layer (well under 1 ms).
  mlp_short input x [1, 32, 256]: one MatMul 256x256 + Relu, output
            y [1, 32, 256]: the serving-overhead scenario's model. Its input
            and output are the same 32 KiB as the echo server's request and
            response, and it runs in well under 0.1 ms, so the overhead is
            not dominated by waiting behind a 1 ms run at 50% load.
  mlp_long  input x [1, 64, 1024]: 4 x (MatMul 1024x1024 + Relu), about 134
            MFLOP per layer (a few ms each on one core: the "layers up to
            5 ms" model of the deadline scenario).
  mlp_deep  input x [1, 64, 256]: MatMul 256->512 + Relu, then 15 x (MatMul
            512x512 + Relu); about 34 MFLOP per layer (~0.2 ms each, a few
            ms per run): the noisy-neighbour scenario's second line, a model
            whose cost keeps the offered rate (and the gRPC front end's
            share of the machine) realistic.
  cnn       input x [N, 3, 32, 32] (dynamic batch): Conv 3->32 3x3, Relu,
            MaxPool 2, Conv 32->64 3x3, Relu, MaxPool 2, Flatten (4096),
            Gemm 4096->512, Relu, Gemm 512->10. A small CNN with a VGG-style
            head for the batching scenario: alone its 8 MB fully connected
            layer is a matrix-vector product bound by reading the weights,
            which a batch reads once for all its rows; about 1 ms per
            request, so that on one lane the lane, not the gRPC front end,
            saturates first.
Random weights (seed 0), opset 17. Layer sizes are parameters of the
functions below, so a layer's time can be tuned.
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

RNG = np.random.default_rng(0)


def weight(name, shape, fan_in):
    w = RNG.standard_normal(shape).astype(np.float32) * np.float32(np.sqrt(2.0 / fan_in))
    return numpy_helper.from_array(w, name)


def save(graph, path):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="orrery-bench")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def mlp(path, rows, width_in, width, layers):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, rows, width_in])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, rows, width])
    nodes, inits = [], []
    prev, fan_in = "x", width_in
    for i in range(layers):
        inits.append(weight(f"w{i}", [fan_in, width], fan_in))
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"]))
        out = "y" if i == layers - 1 else f"h{i}"
        nodes.append(helper.make_node("Relu", [f"m{i}"], [out]))
        prev, fan_in = out, width
    save(helper.make_graph(nodes, "mlp", [x], [y], inits), path)


def cnn(path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 32, 32])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])
    inits = [
        weight("c1w", [32, 3, 3, 3], 27), numpy_helper.from_array(np.zeros(32, np.float32), "c1b"),
        weight("c2w", [64, 32, 3, 3], 288), numpy_helper.from_array(np.zeros(64, np.float32), "c2b"),
        weight("fc1w", [512, 4096], 4096), numpy_helper.from_array(np.zeros(512, np.float32), "fc1b"),
        weight("fc2w", [10, 512], 512), numpy_helper.from_array(np.zeros(10, np.float32), "fc2b"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "c1w", "c1b"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "c2w", "c2b"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p2"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "fc1w", "fc1b"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["rh"]),
        helper.make_node("Gemm", ["rh", "fc2w", "fc2b"], ["y"], transB=1),
    ]
    save(helper.make_graph(nodes, "cnn", [x], [y], inits), path)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_models.py OUT_DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    mlp(os.path.join(out, "mlp.onnx"), rows=32, width_in=256, width=512, layers=8)
    mlp(os.path.join(out, "mlp_short.onnx"), rows=32, width_in=256, width=256, layers=1)
    mlp(os.path.join(out, "mlp_long.onnx"), rows=64, width_in=1024, width=1024, layers=4)
    mlp(os.path.join(out, "mlp_deep.onnx"), rows=64, width_in=256, width=512, layers=16)
    cnn(os.path.join(out, "cnn.onnx"))
    print(out)


if __name__ == "__main__":
    main()
