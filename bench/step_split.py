#!/usr/bin/env python3
"""Where a model loses time at two threads, step by step (issue 4).

Runs `orrery-run MODEL --bench N --threads T --profile` at T=1 and T=2,
alternated for --rounds rounds (the host's speed changes from one minute to
the next, and on the AVX2 host by ~1.3x for whole runs), keeps each step's
fastest time over all rounds per thread count, and ranks the steps by
T2 - T1 / 2: the time a perfect two-way split would save but does not.
Per-step minima over rounds compare the kernels, not the host's state:
a T=1 profile taken in a slow minute next to a T=2 one from a fast minute
shows a "loss" that is only the host.

  bench/step_split.py --orrery-run build/orrery-run \\
      ~/.cache/orrery-bench/models/resnet18/model.onnx --rounds 4 --top 10

Wrap it in the quiet lock (/tmp/quiet or flock) when others share the host.
"""
import argparse
import json
import subprocess
import sys


def profile(binary, model, threads, runs):
    """One orrery-run --profile: (whole-run JSON, [(op, name, min_ms, wait_ms)])."""
    out = subprocess.run([binary, model, "--bench", str(runs), "--threads", str(threads),
                          "--profile"], check=True, capture_output=True, text=True).stdout
    summary, steps = None, []
    for line in out.splitlines():
        if line.startswith("{"):
            summary = json.loads(line)
            continue
        f = line.split()
        # step op name mean_ms share GFLOP/s GB/s min_ms wait_ms asleep
        if len(f) >= 10 and f[0].isdigit():
            steps.append((f[1], f[2], float(f[7]), float(f[8])))
    if summary is None or not steps:
        sys.exit("no profile in orrery-run's output:\n" + out)
    return summary, steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--orrery-run", default="build/orrery-run")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--runs", type=int, default=10, help="timed runs per orrery-run call")
    ap.add_argument("--top", type=int, default=10)
    args = ap.parse_args()

    best = {1: None, 2: None}   # per step: [op, name, min over rounds, wait of that round]
    whole = {1: [], 2: []}
    for _ in range(args.rounds):
        for t in (1, 2):
            summary, steps = profile(args.orrery_run, args.model, t, args.runs)
            whole[t].append((summary["min_ms"], summary["p50_ms"]))
            if best[t] is None:
                best[t] = [list(s) for s in steps]
                continue
            for b, s in zip(best[t], steps):
                if s[2] < b[2]:
                    b[2], b[3] = s[2], s[3]

    for t in (1, 2):
        rounds = ", ".join(f"{mn:.2f}/{p50:.2f}" for mn, p50 in whole[t])
        print(f"T={t} whole run min/p50 ms by round: {rounds}")
    s1 = sum(b[2] for b in best[1])
    s2 = sum(b[2] for b in best[2])
    print(f"sum of step minima: T=1 {s1:.2f} ms, T=2 {s2:.2f} ms, speedup {s1 / s2:.2f}, "
          f"T2 - T1/2 = {s2 - s1 / 2:.2f} ms")
    pairs = sorted(zip(best[1], best[2]), key=lambda p: -(p[1][2] - p[0][2] / 2))
    print(f"{'op':<12} {'name':<44} {'T1_ms':>7} {'T2_ms':>7} {'speedup':>7} {'loss_ms':>7} "
          f"{'wait_ms':>7}")
    for a, b in pairs[:args.top]:
        print(f"{a[0]:<12} {a[1][:44]:<44} {a[2]:7.3f} {b[2]:7.3f} {a[2] / b[2]:7.2f} "
              f"{b[2] - a[2] / 2:7.3f} {b[3]:7.3f}")


if __name__ == "__main__":
    main()
