#!/usr/bin/python3
"""Classifies the slow runs of `orrery-run --bench N --runs-csv FILE`.

  latency_runs.py RUNS.csv [RUNS.csv ...] [--slow 1.10] [--json]

A run is slow when its wall time exceeds `--slow` x the p50. Each slow run's
excess (wall - p50) is attributed, first match wins:
  off-cpu    the calling thread was off its CPU for >= half of the excess
             (wall - thread CPU time: with paravirt steal accounting, the host
             ran another guest, or the OS another thread);
  lane-wait  at T > 1, the caller waited at the step barriers for a worker for
             >= half of the excess (a late or slow worker);
  faults     the run took page faults (minor or major);
  one-step   a single step accounts for >= half of the excess (named);
  uniform    most steps were slower than their own median (the median step is
             >= 1.05x its median): the whole run ran slow, as a host in a slow
             spell (frequency, a busy sibling thread, memory bandwidth) does;
  mixed      none of these.
With `--host-probe-us` series (a fixed loop right before each run, `probe_us`),
also: the correlation of run time with probe time, and p99/p50 of run time /
(probe / its p50), the tail with the core's own speed divided out.
Also prints p99/p50 of wall and of CPU time, and how slow runs cluster in time
(the longest streak of consecutive slow runs): the host's slow spells last
seconds, so its slow runs come in streaks, ours (a fault, an allocation) not.
"""
import argparse
import csv
import json
import statistics
import sys


def pct(v, p):
    """Nearest rank, as orrery-run."""
    s = sorted(v)
    if not s:
        return 0.0
    k = max(1, min(len(s), int(-(-p * len(s) // 100))))
    return s[k - 1]


def corr(a, b):
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    sa = sum((x - ma) ** 2 for x in a) ** 0.5
    sb = sum((y - mb) ** 2 for y in b) ** 0.5
    return sum((x - ma) * (y - mb) for x, y in zip(a, b)) / (sa * sb) if sa > 0 and sb > 0 else 0.0


def load(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    steps = [k for k in (rows[0].keys() if rows else []) if k.startswith("s") and ":" in k]
    return rows, steps


def classify(path, slow_factor):
    rows, steps = load(path)
    if not rows:
        return {"file": path, "runs": 0}
    wall = [float(r["wall_ms"]) for r in rows]
    cpu = [float(r["cpu_ms"]) for r in rows]
    off = [float(r["off_cpu_ms"]) for r in rows]
    lane_wait = [float(r["lane_wait_ms"]) for r in rows]
    p50 = pct(wall, 50)
    med_off = statistics.median(off)
    med_wait = statistics.median(lane_wait)
    med_step = {s: statistics.median(float(r[s]) for r in rows) for s in steps}
    kinds = {}
    worst_steps = {}
    slow_idx = []
    for i, r in enumerate(rows):
        if wall[i] <= slow_factor * p50:
            continue
        slow_idx.append(i)
        excess = wall[i] - p50
        step_excess = {s: float(r[s]) - med_step[s] for s in steps}
        ratios = sorted(float(r[s]) / med_step[s] for s in steps if med_step[s] > 0.005)
        if off[i] - med_off >= 0.5 * excess:
            kind = "off-cpu"
        elif lane_wait[i] - med_wait >= 0.5 * excess:
            kind = "lane-wait"
        elif int(r["minflt"]) + int(r["majflt"]) > 0:
            kind = "faults"
        elif step_excess and max(step_excess.values()) >= 0.5 * excess:
            kind = "one-step"
            top = max(step_excess, key=step_excess.get)
            worst_steps[top] = worst_steps.get(top, 0) + 1
        elif ratios and ratios[len(ratios) // 2] >= 1.05:
            kind = "uniform"
        else:
            kind = "mixed"
        kinds[kind] = kinds.get(kind, 0) + 1
    streak = best = 0
    prev = None
    for i in slow_idx:
        streak = streak + 1 if prev is not None and i == prev + 1 else 1
        best = max(best, streak)
        prev = i
    n = len(rows)
    first = sum(1 for i in slow_idx if i < max(1, n // 10))
    probe = [float(r.get("probe_us") or 0) for r in rows]
    probe_stats = {}
    if all(x > 0 for x in probe):
        pp50 = pct(probe, 50)
        norm = [w / (x / pp50) for w, x in zip(wall, probe)]
        probe_stats = {
            "probe_p99_over_p50": pct(probe, 99) / pp50,
            "corr_wall_probe": corr(wall, probe),
            "speed_normalised_p99_over_p50": pct(norm, 99) / pct(norm, 50),
        }
    return {
        "file": path, "runs": n, "p50_ms": p50, "p99_ms": pct(wall, 99),
        "p99_over_p50": pct(wall, 99) / p50 if p50 > 0 else 0.0,
        "cpu_p99_over_p50": pct(cpu, 99) / pct(cpu, 50) if pct(cpu, 50) > 0 else 0.0,
        "off_cpu_ms_p50": med_off, "off_cpu_ms_p99": pct(off, 99),
        "lane_wait_ms_p50": med_wait, "lane_wait_ms_p99": pct(lane_wait, 99),
        "minflt_runs": sum(1 for r in rows if int(r["minflt"]) > 0),
        "slow_runs": len(slow_idx), "slow_in_first_tenth": first,
        "longest_slow_streak": best, "kinds": kinds,
        "one_step_culprits": dict(sorted(worst_steps.items(), key=lambda kv: -kv[1])[:5]),
        **probe_stats,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+")
    p.add_argument("--slow", type=float, default=1.10, help="slow = wall > SLOW x p50")
    p.add_argument("--json", action="store_true", help="one JSON line per file")
    args = p.parse_args()
    for path in args.files:
        c = classify(path, args.slow)
        if args.json or c["runs"] == 0:
            print(json.dumps(c))
            continue
        print(f"{path}: {c['runs']} runs, p50 {c['p50_ms']:.3f} ms, p99/p50 "
              f"{c['p99_over_p50']:.2f} (CPU time {c['cpu_p99_over_p50']:.2f}); off-CPU ms "
              f"p50/p99 {c['off_cpu_ms_p50']:.3f}/{c['off_cpu_ms_p99']:.3f}; lane wait ms "
              f"p50/p99 {c['lane_wait_ms_p50']:.3f}/{c['lane_wait_ms_p99']:.3f}; runs with "
              f"faults {c['minflt_runs']}")
        print(f"  slow (> {args.slow:.2f} x p50): {c['slow_runs']} "
              f"({c['slow_in_first_tenth']} in the first tenth, longest streak "
              f"{c['longest_slow_streak']}): " +
              ", ".join(f"{k} {v}" for k, v in sorted(c["kinds"].items(), key=lambda kv: -kv[1])) +
              (f"; one-step culprits {c['one_step_culprits']}" if c["one_step_culprits"] else ""))
        if "probe_p99_over_p50" in c:
            print(f"  host probe before each run: p99/p50 {c['probe_p99_over_p50']:.2f}, "
                  f"correlation with run time {c['corr_wall_probe']:.2f}; run time / probe "
                  f"speed p99/p50 {c['speed_normalised_p99_over_p50']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
