#!/usr/bin/python3
"""Generates the ONNX backend node-test suite from Debian's python3-onnx.

Writes OUT_DIR/node/<case>/model.onnx and
OUT_DIR/node/<case>/test_data_set_<i>/{input,output}_<k>.pb, the layout of
`backend-test-tools generate-data`, but only the `node` cases (the `real`
model cases need downloads). The case generators reseed numpy before every
export, so the output is byte-for-byte deterministic.

Usage: gen_suite.py OUT_DIR [STAMP_FILE]
"""
import os
import shutil
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
import onnx.backend.test.case.node as node_test  # noqa: E402
from onnx import numpy_helper  # noqa: E402


def write_value(path, value, type_proto, name):
    """Serializes one input/output the way cmd_tools.generate_data does."""
    if type_proto.HasField("sequence_type"):
        proto = numpy_helper.from_list(value, name)
    elif type_proto.HasField("optional_type"):
        proto = numpy_helper.from_optional(value, name)
    elif type_proto.HasField("map_type"):
        proto = numpy_helper.from_dict(value, name)
    else:
        proto = numpy_helper.from_array(value, name)
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    out = os.path.join(sys.argv[1], "node")
    # Rebuild from scratch so a changed onnx version leaves no stale cases.
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = node_test.collect_testcases(None)
    for case in cases:
        case_dir = os.path.join(out, case.name)
        # A few names repeat in onnx 1.12 (test_reduce_sum_negative_axes_
        # keepdims_random); like backend-test-tools, the last one wins.
        if os.path.exists(case_dir):
            shutil.rmtree(case_dir)
        os.makedirs(case_dir)
        with open(os.path.join(case_dir, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        graph = case.model.graph
        for i, (inputs, outputs) in enumerate(case.data_sets):
            data_dir = os.path.join(case_dir, f"test_data_set_{i}")
            os.makedirs(data_dir)
            for j, value in enumerate(inputs):
                write_value(os.path.join(data_dir, f"input_{j}.pb"), value,
                            graph.input[j].type, graph.input[j].name)
            for j, value in enumerate(outputs):
                write_value(os.path.join(data_dir, f"output_{j}.pb"), value,
                            graph.output[j].type, graph.output[j].name)
    if len(sys.argv) == 3:
        with open(sys.argv[2], "w") as f:
            f.write(f"onnx {onnx.__version__}: {len(os.listdir(out))} node cases\n")
    print(f"gen_suite: {len(os.listdir(out))} node cases in {out}")


if __name__ == "__main__":
    main()
