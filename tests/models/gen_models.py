#!/usr/bin/python3
"""Generates the small ONNX models the tests use, with expected outputs
computed independently by numpy, in the ONNX backend-test layout:

  OUT/<model>/model.onnx
  OUT/<model>/test_data_set_0/input_<i>.pb, output_<i>.pb

Usage: gen_models.py OUT_DIR
"""
import os
import sys
import warnings

import numpy as np

# onnx 1.12 still uses aliases that numpy 1.24 removed.
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for _alias, _type in (("float", float), ("int", int), ("bool", bool), ("object", object)):
        if not hasattr(np, _alias):
            setattr(np, _alias, _type)

import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

RNG = np.random.default_rng(20261121)


def save(out_dir, name, model, inputs, outputs):
    onnx.checker.check_model(model)
    d = os.path.join(out_dir, name)
    data = os.path.join(d, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    for i, (n, v) in enumerate(inputs):
        with open(os.path.join(data, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v, n).SerializeToString())
    for i, (n, v) in enumerate(outputs):
        with open(os.path.join(data, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v, n).SerializeToString())


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def mlp(out_dir):
    """Gemm -> Relu -> Gemm -> Softmax with a dynamic batch dimension."""
    w1 = RNG.standard_normal((16, 32)).astype(np.float32) * 0.5
    b1 = RNG.standard_normal((32,)).astype(np.float32) * 0.1
    w2 = RNG.standard_normal((32, 8)).astype(np.float32) * 0.5
    b2 = RNG.standard_normal((8,)).astype(np.float32) * 0.1
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["hr"], name="relu1"),
        helper.make_node("Gemm", ["hr", "w2", "b2"], ["logits"], name="fc2"),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 8])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
         numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(b2, "b2")])
    model = helper.make_model(graph, producer_name="orrery-tests",
                              opset_imports=[helper.make_opsetid("", 13)])
    x = RNG.standard_normal((2, 16)).astype(np.float32)
    y = softmax(np.maximum(x @ w1 + b1, 0) @ w2 + b2, axis=1).astype(np.float32)
    save(out_dir, "mlp", model, [("x", x)], [("probs", y)])


def mlp_ops(out_dir):
    """Every other v0 op: MatMul, Add, Sub, Mul, Div, Tanh, Sigmoid,
    Reshape, Flatten, Identity and Constant, with broadcasting."""
    w = RNG.standard_normal((12, 6)).astype(np.float32)
    b = RNG.standard_normal((6,)).astype(np.float32)
    shape = np.array([0, 2, 3], dtype=np.int64)
    nodes = [
        helper.make_node("Constant", [], ["two"], name="const_two",
                         value=numpy_helper.from_array(np.array([2.0], dtype=np.float32))),
        helper.make_node("Flatten", ["x"], ["xf"], name="flatten", axis=1),
        helper.make_node("MatMul", ["xf", "w"], ["m"], name="matmul"),
        helper.make_node("Add", ["m", "b"], ["a"], name="add"),
        helper.make_node("Tanh", ["a"], ["t"], name="tanh"),
        helper.make_node("Sigmoid", ["a"], ["s"], name="sigmoid"),
        helper.make_node("Mul", ["t", "s"], ["ts"], name="mul"),
        helper.make_node("Sub", ["ts", "two"], ["d0"], name="sub"),
        helper.make_node("Div", ["d0", "two"], ["d1"], name="div"),
        helper.make_node("Identity", ["d1"], ["d2"], name="identity"),
        helper.make_node("Reshape", ["d2", "shape"], ["y"], name="reshape"),
    ]
    graph = helper.make_graph(
        nodes, "mlp_ops",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, 3])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"),
         numpy_helper.from_array(shape, "shape")])
    model = helper.make_model(graph, producer_name="orrery-tests",
                              opset_imports=[helper.make_opsetid("", 13)])
    x = RNG.standard_normal((3, 3, 4)).astype(np.float32)
    a = x.reshape(3, 12) @ w + b
    y = ((np.tanh(a) * (1 / (1 + np.exp(-a))) - 2.0) / 2.0).reshape(3, 2, 3).astype(np.float32)
    save(out_dir, "mlp_ops", model, [("x", x)], [("y", y)])


def unsupported(out_dir):
    """A valid ONNX model whose op Orrery does not implement (Det)."""
    nodes = [helper.make_node("Det", ["x"], ["y"], name="determinant")]
    graph = helper.make_graph(
        nodes, "unsupported",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    model = helper.make_model(graph, producer_name="orrery-tests",
                              opset_imports=[helper.make_opsetid("", 13)])
    x = np.eye(3, dtype=np.float32)
    save(out_dir, "unsupported", model, [("x", x)], [("y", np.array(1.0, dtype=np.float32))])


def main():
    out_dir = sys.argv[1]
    mlp(out_dir)
    mlp_ops(out_dir)
    unsupported(out_dir)


if __name__ == "__main__":
    main()
