#!/usr/bin/python3
"""Regenerates the "Results" section of docs/conformance.md from a real run.

Runs BUILD_DIR/tests/conformance/conformance_runner --markdown on the suite
generated in BUILD_DIR and replaces everything between the
`<!-- conformance-results:begin -->` and `<!-- conformance-results:end -->`
markers with the date, the command and the per-op table.

Usage: tests/conformance/update_docs.py [BUILD_DIR]   (default: build)
"""
import datetime
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "conformance.md")
BEGIN = "<!-- conformance-results:begin -->"
END = "<!-- conformance-results:end -->"


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    runner = os.path.join(build, "tests", "conformance", "conformance_runner")
    suite = os.path.join(build, "tests", "conformance", "suite")
    cmd = [runner, suite, "--markdown"]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if run.returncode not in (0, 1):  # 1: gates failed, the table is still valid
        sys.exit(f"update_docs: {' '.join(cmd)} exited {run.returncode}\n{run.stderr}")
    with open(DOC, encoding="utf-8") as f:
        doc = f.read()
    head, sep, rest = doc.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        sys.exit(f"update_docs: markers {BEGIN} / {END} not found in {DOC}")
    today = datetime.date.today().isoformat()
    section = (f"{BEGIN}\nRun on {today} with `{' '.join(cmd)}` "
               f"(Release build; onnx {onnx_version()} node tests).\n\n"
               f"{run.stdout.rstrip()}\n{END}")
    with open(DOC, "w", encoding="utf-8") as f:
        f.write(head + section + tail)
    print(f"update_docs: {DOC} updated ({run.stdout.strip().splitlines()[-1]})")


def onnx_version():
    stamp = os.path.join(sys.argv[1] if len(sys.argv) > 1 else "build",
                         "tests", "conformance", "suite", "generated.stamp")
    try:
        with open(os.path.join(ROOT, stamp), encoding="utf-8") as f:
            return f.read().split(":")[0].replace("onnx ", "")
    except OSError:
        return "?"


if __name__ == "__main__":
    main()
