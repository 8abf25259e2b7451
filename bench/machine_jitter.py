"""The host's own timing jitter, printed next to Orrery's p99/p50 and
prediction error: bench/cpu_jitter (built beside orrery-run, in BUILD/bench)
runs a fixed register-only loop of ~1 ms back to back. When it already varies
more than a target allows, the gap is the machine's (other VMs on the host),
not the runtime's or the scheduler's; the noise comes and goes by the minute,
so it is measured in the same run."""
import json
import os
import subprocess


def measure(build_dir, cpus=None, runs=1000, run_ms=None):
    """{kernel: {p50_ms, p99_ms, p99_over_p50, spread, ...}}, or {} if the probe is not built.
    run_ms: the loop's length (default ~1 ms)."""
    probe = os.path.join(build_dir, "bench", "cpu_jitter")
    if not os.access(probe, os.X_OK):
        return {}
    cmd = (["taskset", "-c", cpus] if cpus else []) + [probe, "--runs", str(runs)] + (["--ms", f"{run_ms:.4f}"] if run_ms else [])
    res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if res.returncode != 0:
        return {}
    out = {}
    for line in res.stdout.splitlines():
        if line.startswith("{"):
            k = json.loads(line)
            out[k["kernel"]] = k
    return out


def describe(j):
    """One sentence for a report."""
    if not j:
        return "fixed-loop jitter probe not run (build the cpu_jitter target)"
    return ("a fixed register-only loop (bench/cpu_jitter, ~1 ms, same CPU, same run): p99/p50 " +
            ", ".join(f"{k} {v['p99_over_p50']:.2f} (spread {100 * v['spread']:.1f}%)" for k, v in j.items()))


def vcpu_round_trip_ns(build_dir, a=0, b=1):
    """Median cache-line round trip between CPUs a and b in ns (bench/cpu_pingpong),
    or None if the probe is not built or there is no CPU b. ~100-120 ns when the
    host puts both vCPUs on one L3, ~400 when not; two-thread plans are 10-15%
    slower in the second state."""
    probe = os.path.join(build_dir, "bench", "cpu_pingpong")
    if not os.access(probe, os.X_OK) or (os.cpu_count() or 1) <= max(a, b):
        return None
    res = subprocess.run([probe, "--a", str(a), "--b", str(b)], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    if res.returncode != 0:
        return None
    for line in res.stdout.splitlines():
        if line.startswith("{"):
            return float(json.loads(line)["p50_ns"])
    return None
