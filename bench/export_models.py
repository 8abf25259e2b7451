#!/usr/bin/python3
"""Exports the real-model set for the ONNX Runtime comparison.

Usage: /usr/bin/python3 bench/export_models.py OUT_DIR [MODEL ...]

Writes, per model, the ONNX test-data layout:
  OUT_DIR/<model>/model.onnx
  OUT_DIR/<model>/test_data_set_0/input_0.pb    random input, fixed seed
  OUT_DIR/<model>/test_data_set_0/output_0.pb   PyTorch's output for it
  OUT_DIR/<model>/export.json                    recipe version, input sensitivity
A model whose export.json has the current RECIPE is kept; anything else in its
dir is rewritten. Weights are random (weights=None, fixed seed): no network, and
accuracy against ORT does not depend on trained values. Prints each exported
graph's op types.

Random weights with BatchNorm's default running stats (mean 0, var 1) make deep
nets collapse: activations vanish or blow up and the output is almost the same
for every input (GoogLeNet's is its fc bias to 1e-12), so an output comparison
would test nothing. BatchNorm running stats are therefore calibrated on a few
random batches first, which keeps every layer's activations near unit variance.
export.json records the input sensitivity ||f(x) - f(x')|| / ||f(x)|| for a
second random input x': how much of the output a comparison actually exercises.
"""
import json
import os
import shutil
import sys
import warnings
from collections import Counter

import numpy as np

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    # Debian's onnx 1.12 still names these numpy aliases, removed in numpy 1.24.
    np.float = float
    np.int = int
    np.bool = bool
    np.object = object
    import onnx
    from onnx import numpy_helper

import torch
import torchvision

OPSET = 17  # newest opset Debian's onnx 1.12 knows
SEED = 0
RECIPE = 2  # bump when anything changes the exported files


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(784, 512), torch.nn.ReLU(),
            torch.nn.Linear(512, 256), torch.nn.ReLU(),
            torch.nn.Linear(256, 10))

    def forward(self, x):
        return self.net(x)


def transformer():
    layer = torch.nn.TransformerEncoderLayer(
        d_model=256, nhead=4, dim_feedforward=1024, dropout=0.0, batch_first=True)
    # enable_nested_tensor=False: the nested-tensor fast path has no ONNX export.
    return torch.nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False)


def vision(ctor, **kw):
    return lambda: ctor(weights=None, **kw)


# name -> (constructor, input shape with batch first)
MODELS = {
    "mlp": (Mlp, (1, 784)),
    "resnet18": (vision(torchvision.models.resnet18), (1, 3, 224, 224)),
    "resnet50": (vision(torchvision.models.resnet50), (1, 3, 224, 224)),
    "mobilenet_v2": (vision(torchvision.models.mobilenet_v2), (1, 3, 224, 224)),
    "squeezenet1_1": (vision(torchvision.models.squeezenet1_1), (1, 3, 224, 224)),
    "googlenet": (vision(torchvision.models.googlenet, aux_logits=False, init_weights=True),
                  (1, 3, 224, 224)),
    "transformer": (transformer, (1, 128, 256)),
}


def calibrate_batchnorm(model, shape):
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average over the calibration batches
    model.train()
    gen = torch.Generator().manual_seed(SEED + 100)
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(8, *shape[1:], generator=gen))
    model.eval()


def save_tensor(arr, name, path):
    t = numpy_helper.from_array(np.ascontiguousarray(arr), name=name)
    with open(path, "wb") as f:
        f.write(t.SerializeToString())


def export(name, out_dir):
    ctor, shape = MODELS[name]
    model_dir = os.path.join(out_dir, name)
    data_dir = os.path.join(model_dir, "test_data_set_0")
    model_path = os.path.join(model_dir, "model.onnx")
    meta_path = os.path.join(model_dir, "export.json")
    meta = {}
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
    if meta.get("recipe") == RECIPE and os.path.exists(model_path):
        print(f"{name}: kept {model_path}")
    else:
        # Written by another recipe (or half-written): start the dir afresh.
        shutil.rmtree(model_dir, ignore_errors=True)
        os.makedirs(data_dir)
        export_one(name, model_path, data_dir, meta_path)

    m = onnx.load(model_path)
    onnx.checker.check_model(m)
    ops = Counter(n.op_type for n in m.graph.node)
    print(f"{name}: {len(m.graph.node)} nodes, ops: " +
          " ".join(f"{op}x{c}" for op, c in sorted(ops.items())))
    return sorted(ops)


def export_one(name, model_path, data_dir, meta_path):
    ctor, shape = MODELS[name]
    torch.manual_seed(SEED)
    model = ctor()
    calibrate_batchnorm(model, shape)
    model.eval()
    gen = torch.Generator().manual_seed(SEED + 1)
    x = torch.randn(*shape, generator=gen)
    x2 = torch.randn(*shape, generator=gen)

    tmp = model_path + ".tmp"
    # Not under no_grad(): with grad enabled, TransformerEncoderLayer skips its
    # fused fast path (aten::_transformer_encoder_layer_fwd), which has no ONNX
    # export, and traces the plain MultiheadAttention ops instead.
    torch.onnx.export(
        model, (x,), tmp, opset_version=OPSET, do_constant_folding=True,
        input_names=["input"], output_names=["output"],
        dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    os.replace(tmp, model_path)
    save_tensor(x.numpy(), "input", os.path.join(data_dir, "input_0.pb"))
    with torch.no_grad():
        y = model(x)
        y2 = model(x2)
    save_tensor(y.numpy(), "output", os.path.join(data_dir, "output_0.pb"))
    sensitivity = float((y - y2).norm() / y.norm())
    with open(meta_path, "w") as f:
        json.dump({"recipe": RECIPE, "seed": SEED, "opset": OPSET, "torch": torch.__version__,
                   "input_shape": list(shape), "sensitivity": sensitivity}, f)
    print(f"{name}: exported {model_path} (input sensitivity {sensitivity:.3g})")


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = argv[1]
    names = argv[2:] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"unknown model(s): {unknown}; known: {list(MODELS)}", file=sys.stderr)
        return 2
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    all_ops = set()
    for name in names:
        all_ops.update(export(name, out_dir))
    print("all ops: " + " ".join(sorted(all_ops)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
