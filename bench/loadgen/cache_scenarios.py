#!/usr/bin/python3
"""The issue-7 host-cache and device scenarios, run by bench/run_cache_scenarios.sh.

    cache_scenarios.py --build DIR --out DIR --doc docs/benchmarks.md [--only 1,2,3,4] [--seconds S]
                       [--s1-policies keepalive,no_keepalive,lru] [--s1-capacity REQ_PER_S]

S1 many models: COUNT (1,000) MLPs of 1-2 MiB (make_cache_models.py) over 50
   tenants (model i belongs to tenant i % 50), --host-cache-bytes = half of
   their segment bytes, a trace of Zipf(1.0) popularity (ranks shuffled) plus
   a few periodic models, Poisson at 70% of the measured capacity, 100 ms
   deadlines; every model is called once during the warm-up so that all are
   uploaded. Run three times: miss-cost eviction with keep-alive (the
   default), with `--keepalive off`, and `--host-eviction lru`.
S2 cold start: ResNet-50 (~/.cache/orrery-bench/models, bench/run_real_models.sh
   exports it) evicted from the host cache, then one request, N times
   (orrery-loadgen --cold-start); against `segment bytes / disk bandwidth
   (dd O_DIRECT on the same file system) + one warm inference`, and against
   ONNX Runtime's session creation + first run (bench/ort_run.js --cold).
S3 simulated accelerator: 40 of the models over 8 tenants, `--sim-device`
   with room for 6 of them, the Zipf ranks reshuffled every 1.5 s, 70% of
   the lanes' capacity, 100 ms deadlines. From the server's device counters
   over the measured window: link and device busy time, the time both were
   busy at once, and device runs that ended after their deadline by cause
   (weights later than planned; a transfer queued after the request's
   placement went first = unplanned; the run itself overran).
S4 memory bound: the COUNT models called round robin (every request a miss)
   while orreryd's peak RSS (VmHWM) is read from /proc, with a breakdown
   by kind from /proc/PID/smaps at the highest RSS sampled; bound = the cache
   budget + an idle orreryd's RSS (measured) + RocksDB's configured memory +
   128 MiB for serving. Uploaded with --calibrate-uploads false, so its
   upload time against S1's (calibrating) says what calibration costs.
Rewrites the block between <!-- cache-scenarios:begin --> and
<!-- cache-scenarios:end --> in the doc: a summary row per target and a
section per scenario (<!-- cache-sN:begin/end -->, with its run's date,
commit, load average and commands); scenarios not run keep theirs.
"""
import argparse
import csv
import datetime
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scenarios import Ctx, replace_block  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TENANTS = 50
DEADLINE_MS = 100
WARMUP_S = 6.0
# S4's fixed overhead above the host cache budget: the RSS of an idle
# orreryd with no models (measured: the binary, its libraries -- gRPC,
# RocksDB opened; the CUDA ones only with --device on a GPU machine,
# cache/cuda_backend.h --) + RocksDB's configured
# memory (64 MiB of memtables + 8 MiB block cache, storage/catalog.cc) + this
# margin for what serving adds besides the cached models: pooled run states
# of resident models, malloc arenas, thread stacks, gRPC buffers.
ROCKSDB_BYTES = 72 << 20
SERVING_MARGIN_BYTES = 128 << 20
# S3: 40 of the models over 8 tenants; a simulated device of 24 MiB (6 of
# these ~4 MiB segments: a sixth of the working set), a slow 0.25 Gb/s link
# (a segment takes ~134 ms, so that transfers are long enough to overlap
# many device runs), 20 us latency, device runs at 2x the CPU's speed;
# the popularity ranks are reshuffled every 1.5 s.
S3_MODELS = 40
S3_TENANTS = 8
S3_DEVICE_MEMORY = 24 << 20
S3_DEVICE = f"memory={S3_DEVICE_MEMORY},link-gbps=0.25,latency-us=20,speedup=2"
S3_WARMUP_S = 4.0
S3_PHASE_S = 1.5
SCENARIOS = ("1", "2", "3", "4")
INFO = "info"  # a result's `ok` when it has no target (reported for comparison)
# orreryd's orrery_admitted_misses_total labels (api/miss_causes.h), in the
# order the S1 table prints them.
MISS_CAUSES = ("load_late", "room_wait", "evicted_after_admission", "after_load", "lane")
MISS_HOWS = ("rejected_after_load", "dropped", "ended_late", "acquire_failed")


def tenant_of(i):
    return f"t{i % TENANTS:02d}"


def write_trace(path, count, rate, warmup, seconds, periodic, seed=1):
    """Zipf(1.0) Poisson arrivals plus `periodic` models called every 2-8 s
    (+-2%), and one call of every model spread over the first 2/3 of the
    warm-up. `rate`: req/s, or a function of the time (s from the start)
    giving it (a stepped rate: each gap is drawn at the rate where it
    starts). Returns the number of arrivals."""
    rate_at = rate if callable(rate) else (lambda _t: rate)
    rng = random.Random(seed)
    ranks = list(range(count))
    rng.shuffle(ranks)  # model ranks[k] has popularity rank k
    zipf = [1.0 / (k + 1) for k in range(count)]
    cum, acc = [], 0.0
    for w in zipf:
        acc += w
        cum.append(acc)
    periodic_models = ranks[count - periodic:]  # from the unpopular tail
    rows = []
    for i in range(count):
        rows.append((warmup * 2 / 3 * i / count, i))
    t, end = 0.0, warmup + seconds
    while True:
        t += rng.expovariate(rate_at(t))
        if t >= end:
            break
        x = rng.random() * acc
        lo, hi = 0, count - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if cum[mid] < x:
                lo = mid + 1
            else:
                hi = mid
        rows.append((t, ranks[lo]))
    for m in periodic_models:
        period = rng.uniform(2.0, 8.0)
        t = rng.uniform(0, period)
        while t < end:
            rows.append((t, m))
            t += period * rng.uniform(0.98, 1.02)
    rows.sort()
    with open(path, "w") as f:
        for t, m in rows:
            f.write(f"{t:.6f},{tenant_of(m)},m{m:04d},{DEADLINE_MS}\n")
    return len(rows)


def round_robin_trace(path, count, rate, cycles):
    with open(path, "w") as f:
        for k in range(count * cycles):
            m = k % count
            f.write(f"{k / rate:.6f},{tenant_of(m)},m{m:04d},\n")


def smaps_breakdown(pid):
    """Resident bytes of process `pid` by kind, from /proc/PID/smaps: what the
    mappings' sizes and names say they are (orreryd's segment buffers are
    mmapped blocks of whole 2 MiB pages; a 256 KiB block is a pooled run
    state's scratch)."""
    kinds = {}
    prev_name, size, name = "", 0, ""
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split(None, 5)
            if "-" in head[0] and len(head) >= 5 and ":" not in head[0]:
                prev_name = name
                lo, hi = (int(x, 16) for x in head[0].split("-"))
                size, name = hi - lo, head[5].strip() if len(head) > 5 else ""
            elif head[0] == "Rss:":
                rss = int(head[1]) << 10
                if "libcublas" in name or "libcuda" in name or (not name and "libcublas" in prev_name):
                    k = "CUDA libraries (code, data, .bss), loaded at start"
                elif "/" in name or name == "[heap]":
                    k = "orreryd, other libraries, brk heap"
                elif name:
                    k = "other"
                elif size >= 2 << 20 and size % (2 << 20) in (0, 4096):
                    k = "segment buffers (the host cache's charge)"
                elif size % (260 << 10) == 0:
                    k = "256 KiB blocks: pooled run states' scratch of resident models"
                elif size >= 16 << 20:
                    k = "glibc malloc arenas"
                else:
                    k = "other anonymous: RocksDB memtables + block cache, stacks, gRPC, models' plans"
                kinds[k] = kinds.get(k, 0) + rss
    return kinds


def idle_rss(orreryd):
    """RSS of a freshly started orreryd with no models (1 s after it listens)."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        port = os.path.join(d, "port")
        p = subprocess.Popen([orreryd, "--data-dir", os.path.join(d, "data"), "--listen", "127.0.0.1:0",
                              "--port-file", port, "--log-level", "warn"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(300):
                if os.path.exists(port) and open(port).read().strip():
                    break
                time.sleep(0.1)
            time.sleep(1)
            status = dict(line.split(":", 1) for line in open(f"/proc/{p.pid}/status"))
            return int(status["VmRSS"].split()[0]) << 10
        finally:
            p.terminate()
            p.wait()


class RssWatch(threading.Thread):
    """Peak RSS (VmHWM) of the orreryd started from `binary` while running,
    and smaps_breakdown() at the highest RSS seen (at most once a second)."""

    def __init__(self, binary):
        super().__init__(daemon=True)
        self.binary = os.path.realpath(binary)
        self.stop = threading.Event()
        self.peak_kib = 0
        self.first_kib = 0
        self.breakdown = {}
        self.breakdown_rss = 0
        self.breakdown_at = 0.0

    def find(self):
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                argv0 = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[0].decode()
            except OSError:
                continue
            if argv0 and os.path.realpath(argv0) == self.binary:
                return pid
        return None

    def run(self):
        pid = None
        while not self.stop.is_set():
            pid = pid or self.find()
            if pid:
                try:
                    status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status"))
                    rss = int(status["VmRSS"].split()[0])
                    self.first_kib = self.first_kib or rss
                    self.peak_kib = max(self.peak_kib, int(status["VmHWM"].split()[0]), rss)
                    if rss << 10 > self.breakdown_rss and time.monotonic() - self.breakdown_at >= 1:
                        self.breakdown = smaps_breakdown(pid)
                        self.breakdown_rss = sum(self.breakdown.values())
                        self.breakdown_at = time.monotonic()
                except (OSError, KeyError, ValueError):
                    pid = None
            time.sleep(0.05)


def segment_ratio(ctx, models_dir):
    """Segment bytes / ONNX file bytes of m0000 (a --cold-start run)."""
    path = os.path.join(models_dir, "m0000.onnx")
    s = ctx.run("ratio", ["--model", f"m0000={path}", "--stream", "a:m0000:1", "--cold-start", "1",
                          "--orreryd-arg=--calibrate-uploads=false"], duration=1, warmup=0, plot=False)
    return s["cold_start"][0]["cycles"][0]["segment_bytes"] / os.path.getsize(path)


S1_POLICIES = {"keepalive": ("miss cost + keep-alive", []),
               "no_keepalive": ("miss cost, keep-alive off", ["--orreryd-arg=--keepalive=off"]),
               "lru": ("LRU", ["--orreryd-arg=--host-eviction=lru"])}
# S1's capacity ramp: the S1 trace at rates stepped up by S1_RAMP_FACTOR every
# S1_RAMP_STEP_S from S1_RAMP_FIRST to past S1_RAMP_LAST req/s (the warm-up at
# the first step's rate); on the 2-core VM goodput peaks at ~3,000-4,500 req/s
# and falls beyond, so the top steps are overload.
S1_RAMP_FIRST = 400
S1_RAMP_LAST = 7000
S1_RAMP_FACTOR = 1.25
S1_RAMP_STEP_S = 2.0


def s1_ramp_rates():
    rates = [float(S1_RAMP_FIRST)]
    while rates[-1] < S1_RAMP_LAST:
        rates.append(rates[-1] * S1_RAMP_FACTOR)
    return rates


def step_goodputs(csv_path, rates, step_s):
    """Per ramp step (by when a request was sent, in the measured window):
    (offered rate, sent, requests answered OK within their deadline per
    second, attainment of the admitted) from orrery-loadgen's per-request CSV."""
    steps = [{"sent": 0, "ok": 0, "early": 0} for _ in rates]
    with open(csv_path) as f:
        for row in csv.DictReader(f):
            k = int(float(row["sent_s"]) / step_s)
            if 0 <= k < len(rates):
                steps[k]["sent"] += 1
                steps[k]["ok"] += row["outcome"] == "ok"
                steps[k]["early"] += row["outcome"] == "rejected_early"
    out = []
    for r, c in zip(rates, steps):
        admitted = c["sent"] - c["early"]
        out.append((r, c["sent"], c["ok"] / step_s, c["ok"] / admitted if admitted else 0.0))
    return out


def s1_capacity(ctx, models_dir, count, budget):
    """The server's capacity on the S1 workload itself: the S1 trace (the
    same 1,000 models, Zipf popularity, periodic models, every model called
    in the warm-up, host cache at the same budget, default policy), its rate
    stepped up from S1_RAMP_FIRST req/s by S1_RAMP_FACTOR every S1_RAMP_STEP_S
    to overload; capacity = the highest goodput of a step (its requests
    answered OK within their deadline, per second). Loads, evictions and the
    client's own CPU are in it, as in the measured runs. Returns (capacity,
    the steps as step_goodputs gives them)."""
    rates = s1_ramp_rates()

    def rate_at(t):
        return rates[min(len(rates) - 1, max(0, int((t - WARMUP_S) / S1_RAMP_STEP_S)))]

    seconds = S1_RAMP_STEP_S * len(rates)
    trace = os.path.join(ctx.out, "s1_ramp_trace.csv")
    write_trace(trace, count, rate_at, WARMUP_S, seconds, periodic=max(1, count // 50), seed=2)
    ctx.run("s1_capacity", ["--model-dir", models_dir, "--trace", trace,
                            f"--orreryd-arg=--host-cache-bytes={budget}"], duration=seconds, warmup=WARMUP_S,
            plot=False)
    steps = step_goodputs(os.path.join(ctx.out, "s1_capacity.csv"), rates, S1_RAMP_STEP_S)
    return max(g for _, _, g, _ in steps), steps


def s1_many(ctx, models_dir, count, budget, seconds, policies, cap=None):
    """Capacity (s1_capacity, unless given), then the S1 trace at 70% of it
    once per policy in `policies` (keys of S1_POLICIES)."""
    steps = []
    if cap is None:
        cap, steps = s1_capacity(ctx, models_dir, count, budget)
    rate = 0.7 * cap
    trace = os.path.join(ctx.out, "s1_trace.csv")
    n = write_trace(trace, count, rate, WARMUP_S, seconds, periodic=max(1, count // 50))
    runs = {}
    for tag in policies:
        runs[tag] = ctx.run(f"s1_{tag}", ["--model-dir", models_dir, "--trace", trace,
                                          f"--orreryd-arg=--host-cache-bytes={budget}"] + S1_POLICIES[tag][1],
                            duration=seconds, warmup=WARMUP_S, plot=False)
    return cap, steps, rate, n, runs


def s1_rows(runs, seconds):
    rows = []
    for tag, s in runs.items():
        t, v = s["total"], s["server"]
        acq = v["host_hits"] + v["host_joins"] + v["host_misses"]
        rows.append({
            "policy": S1_POLICIES[tag][0], "tag": tag,
            "attainment": t["attainment"], "sent": t["sent"], "rejected_early": t["rejected_early"],
            "late": t["late"], "dropped": t["rejected_late"], "errors": t["errors"], "p99_ms": t["p99_ms"],
            "hit_ratio": v["host_hits"] / acq if acq else 0, "cold_loads": v["host_misses"] + v["host_joins"],
            "loads_per_s": v["host_loads"] / seconds, "gb_loaded": v["host_bytes_loaded"] / 1e9,
            "prewarms": v["host_prewarms"], "expirations": v["host_expirations"],
            "idle_mb": v["host_idle_byte_seconds"] / seconds / 1e6, "upload_s": v["upload_seconds"],
            "uploaded": v["models_uploaded"],
            "misses": " / ".join(f"{v.get('miss_cause_' + c, 0):.0f}" for c in MISS_CAUSES),
            "misses_how": " / ".join(f"{v.get('miss_how_' + h, 0):.0f}" for h in MISS_HOWS)})
    return rows


def disk_bandwidth(directory, size):
    """Median of 3 O_DIRECT reads (dd) of a `size`-byte file in `directory`."""
    path = os.path.join(directory, "disk_probe.bin")
    mib = max(1, size >> 20)
    subprocess.run(["dd", "if=/dev/urandom", f"of={path}", "bs=1M", f"count={mib}", "conv=fsync"],
                   check=True, stderr=subprocess.DEVNULL)
    rates = []
    for _ in range(3):
        t0 = time.monotonic()
        subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=1M", "iflag=direct"], check=True,
                       stderr=subprocess.DEVNULL)
        rates.append((mib << 20) / (time.monotonic() - t0))
    os.remove(path)
    return statistics.median(rates)


def ort_cold(model, inp, reps=3):
    node_modules = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                                "orrery-bench", "node_modules")
    out = []
    for _ in range(reps):
        fd = os.open(model, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # the ONNX file from disk, as Orrery's segment
        os.close(fd)
        r = subprocess.run(["node", os.path.join(ROOT, "bench", "ort_run.js"), model, "--input", f"input={inp}",
                            "--cold", "--node-modules", node_modules], stdout=subprocess.PIPE, text=True, check=True)
        out.append(json.loads(r.stdout.splitlines()[0]))
    return out


def s2_cold(ctx, cycles):
    model_dir = os.environ.get("ORRERY_BENCH_MODELS", os.path.expanduser("~/.cache/orrery-bench/models"))
    model = os.path.join(model_dir, "resnet50", "model.onnx")
    inp = os.path.join(model_dir, "resnet50", "test_data_set_0", "input_0.pb")
    if not os.path.exists(model):
        return None
    s = ctx.run("s2_cold", ["--model", f"resnet50={model}", "--stream", "a:resnet50:1", "--cold-start",
                            str(cycles)], duration=1, warmup=0, plot=False)
    runs = s["cold_start"][0]["cycles"]
    bw = disk_bandwidth(os.environ.get("TMPDIR", "/tmp"), int(runs[0]["segment_bytes"]))
    ort = ort_cold(model, inp)
    return {"runs": runs, "disk_bps": bw, "loader_bps": s.get("host_loader_bytes_per_sec", 0), "ort": ort}


def s3_trace(path, models, tenants, rate, warmup, seconds, seed=3):
    """Poisson arrivals at `rate`, Zipf(1.0) over `models` (model i of tenant
    i % tenants), ranks shuffled anew every S3_PHASE_S (the hot set moves, so
    the device cache must take new models in while it serves), 100 ms
    deadlines; every model called once in the first half of the warm-up.
    Returns the number of arrivals."""
    rng = random.Random(seed)
    ranks = list(range(models))
    rng.shuffle(ranks)
    phase = 0
    cum, acc = [], 0.0
    for k in range(models):
        acc += 1.0 / (k + 1)
        cum.append(acc)
    rows = [(warmup / 2 * i / models, i) for i in range(models)]
    t = 0.0
    while True:
        t += rng.expovariate(rate)
        if t >= warmup + seconds:
            break
        if int(t / S3_PHASE_S) != phase:
            phase = int(t / S3_PHASE_S)
            rng.shuffle(ranks)
        x = rng.random() * acc
        k = next(j for j, c in enumerate(cum) if c >= x)
        rows.append((t, ranks[k]))
    rows.sort()
    with open(path, "w") as f:
        for t, m in rows:
            f.write(f"{t:.6f},d{m % tenants:02d},m{m:04d},{DEADLINE_MS}\n")
    return len(rows)


def s3_device(ctx, models_dir, seconds):
    """The simulated accelerator with a device cache smaller than the
    working set: S3_MODELS models over S3_TENANTS tenants, open loop at 70% of
    the CPU lanes' capacity (measured without the device)."""
    models = [f"m{i:04d}" for i in range(S3_MODELS)]
    margs = []
    for m in models:
        margs += ["--model", f"{m}={os.path.join(models_dir, m + '.onnx')}"]
    cap_args = list(margs)
    for i in range(S3_TENANTS):
        cap_args += ["--stream", f"d{i:02d}:{models[i]}:c1"]
    cap = ctx.run("s3_capacity", cap_args, duration=4, warmup=1, plot=False)["total"]["goodput_rps"]
    rate = 0.7 * cap
    trace = os.path.join(ctx.out, "s3_trace.csv")
    n = s3_trace(trace, S3_MODELS, S3_TENANTS, rate, S3_WARMUP_S, seconds)
    s = ctx.run("s3_device", margs + ["--trace", trace, f"--orreryd-arg=--sim-device={S3_DEVICE}"],
                duration=seconds, warmup=S3_WARMUP_S, plot=False)
    return cap, rate, n, s


def s4_memory(ctx, models_dir, count, budget):
    trace = os.path.join(ctx.out, "s4_trace.csv")
    rate = 150
    round_robin_trace(trace, count, rate, 2)
    watch = RssWatch(ctx.orreryd)
    watch.start()
    try:
        s = ctx.run("s4_memory", ["--model-dir", models_dir, "--trace", trace,
                                  f"--orreryd-arg=--host-cache-bytes={budget}",
                                  "--orreryd-arg=--calibrate-uploads=false"],
                    duration=2 * count / rate, warmup=0, plot=False)
    finally:
        watch.stop.set()
        watch.join()
    return s, watch.first_kib << 10, watch.peak_kib << 10, watch.breakdown


def load_average():
    return open("/proc/loadavg").read().split()[:3]


def git_commit(doc=""):
    """HEAD, and whether files besides `doc` (the report, rewritten by an
    earlier run) differ from it."""
    r = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE, text=True)
    doc = os.path.abspath(doc) if doc else ""
    exclude = [f":(exclude){doc}"] if doc.startswith(ROOT + os.sep) else []
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "--", ROOT] + exclude,
                           stdout=subprocess.PIPE, text=True).stdout.strip()
    return r.stdout.strip() + (" (with uncommitted changes)" if dirty else "")


def fmt_mb(b):
    return f"{b / (1 << 20):.0f} MiB"


def read_block(path, name):
    """The lines between <!-- NAME:begin --> and <!-- NAME:end --> ([] if none)."""
    if not path or not os.path.exists(path):
        return []
    text = open(path).read()
    b, e = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    if b not in text or e not in text:
        return []
    return text[text.index(b) + len(b):text.index(e)].strip("\n").split("\n")


def old_parts(lines):
    """From a block written before: each scenario's summary rows and its
    section (<!-- cache-sN:begin --> .. end), so that a run of some scenarios
    (--only) keeps the others' results."""
    rows, sections = {}, {}
    cur = None
    for line in lines:
        for n in SCENARIOS:
            if line.startswith(f"| S{n} "):
                rows.setdefault(n, []).append(line)
            if line == f"<!-- cache-s{n}:begin -->":
                cur = n
                sections[n] = []
        if cur is not None:
            sections[cur].append(line)
            if line == f"<!-- cache-s{cur}:end -->":
                cur = None
    return rows, sections


def s1_earlier(section, summary_rows, tags):
    """What an S1 run of some policies (--s1-policies) keeps of the doc's S1
    section for the other policies `tags`, so that runs split to fit short
    quiet windows make one table: their table rows (marked "(earlier run)")
    and summary rows, by tag, and a note naming the run they came from."""
    table, notes, summary = {}, [], {}
    for t in tags:
        label = S1_POLICIES[t][0]
        for line in section:
            if line.startswith(f"| {label} |") or line.startswith(f"| {label} (earlier run) |"):
                table[t] = f"| {label} (earlier run) |" + line.split("|", 2)[2]
        for line in summary_rows:
            if line.startswith(f"| S1 admitted requests in time ({label})"):
                summary[t] = line
    notes = [x for x in section if x.startswith("Rows marked (earlier run)")]
    run = next((x for x in section if x.startswith("Run: ")), None)
    if run and any(not x.startswith(f"| {S1_POLICIES[t][0]} (earlier run) |")
                   for t in table for x in section if x.startswith(f"| {S1_POLICIES[t][0]} ")):
        # The earlier run's capacity measurement, when it made one (the ramp).
        detail = next((x for x in section if "Capacity on this workload:" in x and "ramp" in x), "")
        capacity = detail[detail.index("Capacity on this workload:"):detail.index(" Offered ")] if detail else ""
        notes = [f"Rows marked (earlier run) are from the run {run[len('Run: '):]} The offered rate is in their "
                 f"summary rows." + (f" That run measured: {capacity}" if capacity else "")]
        fence = [k for k, x in enumerate(section) if x == "```"]
        if len(fence) >= 2:
            notes += ["", "Its commands:", ""] + section[fence[-2]:fence[-1] + 1]  # its own: the last block
    return table, ([""] + notes if notes and table else []), summary


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--doc", default="")
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--s3-seconds", type=float, default=15)
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--cold-cycles", type=int, default=5)
    p.add_argument("--only", default=",".join(SCENARIOS))
    p.add_argument("--s1-policies", default=",".join(S1_POLICIES),
                   help="S1's policies to run, of " + ",".join(S1_POLICIES))
    p.add_argument("--s1-capacity", type=float, default=None,
                   help="S1's capacity in req/s (from an earlier run's report) instead of measuring it")
    p.add_argument("--command", default="bench/run_cache_scenarios.sh")
    args = p.parse_args()
    only = set(args.only.split(","))
    policies = [x for x in args.s1_policies.split(",") if x]
    if not policies or any(x not in S1_POLICIES for x in policies):
        p.error(f"--s1-policies: a comma-separated list of {', '.join(S1_POLICIES)}")
    os.makedirs(args.out, exist_ok=True)
    ctx = Ctx(argparse.Namespace(build=args.build, models=args.out, out=args.out, seconds=args.seconds,
                                 noisy_factor=1))
    models_dir = os.path.join(args.out, "cache-models")
    onnx_total = int(subprocess.run([sys.executable, os.path.join(HERE, "make_cache_models.py"), models_dir,
                                     str(args.count)], stdout=subprocess.PIPE, text=True, check=True).stdout)
    files = sum(os.path.getsize(os.path.join(models_dir, f"m{i:04d}.onnx")) for i in range(args.count))
    ratio = segment_ratio(ctx, models_dir) if only & {"1", "3", "4"} else 1.0
    segments = int(files * ratio)
    budget = segments // 2
    results = {}   # scenario -> [(name, target, got, ok), or a summary row kept from the doc]
    old_rows, old_sections = old_parts(read_block(args.doc, "cache-scenarios"))
    sections = {}  # scenario -> lines (without the markers)
    commit = git_commit(args.doc)

    def run_line(load_before, started):
        return (f"Run: `{args.command}` on {started} UTC at commit {commit} ({os.cpu_count()} cores, shared with "
                f"other work; load average {' '.join(load_before)} before, {' '.join(load_average())} after).")

    def begin():
        return load_average(), datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"), len(ctx.commands)

    if "1" in only:
        lb, started, c0 = begin()
        cap, steps, rate, n, runs = s1_many(ctx, models_dir, args.count, budget, args.seconds, policies,
                                            args.s1_capacity)
        rows = s1_rows(runs, args.seconds)
        if steps:
            peak = max(range(len(steps)), key=lambda k: steps[k][2])
            capacity = (f"Capacity on this workload: {cap:.0f} req/s, the highest goodput (requests answered OK "
                        f"within their deadline, per second) of the steps of a ramp of the S1 trace (the same "
                        f"models, popularity, budget and default policy; loads, evictions and the client included; "
                        f"`s1_capacity` below): {WARMUP_S:.0f} s warm-up, then {S1_RAMP_STEP_S:g} s steps from "
                        f"{S1_RAMP_FIRST} req/s x {S1_RAMP_FACTOR:g}; the peak at the step offered "
                        f"{steps[peak][0]:.0f} req/s. Steps (offered: goodput, attainment of the admitted): " +
                        ", ".join(f"{r:.0f}: {g:.0f} ({100 * a:.1f}%)" for r, _, g, a in steps) +
                        ("" if peak < len(steps) - 1 else " **The last step was the peak: the ramp did not "
                         "saturate the server; capacity is at least this.**") + ".")
        else:
            capacity = (f"Capacity on this workload: {cap:.0f} req/s, given with `--s1-capacity` (measured by an "
                        f"earlier run's ramp of the S1 trace, see there).")
        lines = ["### S1 many models", "", run_line(lb, started), "",
                 f"{args.count} MLPs (`make_cache_models.py`: 1-2 MiB of weights each, {onnx_total / 1e9:.2f} GB "
                 f"in all) over {TENANTS} tenants; `--host-cache-bytes {budget}`: half of what the host tier charges for "
                 f"them, estimated as {segments / 1e9:.2f} GB from m0000 (charged {ratio:.3f} x its ONNX file: the "
                 f"segment, rounded up to 2 MiB). {capacity} Offered {rate:.0f} req/s (70%), Zipf(1.0) "
                 f"over shuffled ranks plus {max(1, args.count // 50)} periodic models (every 2-8 s), "
                 f"{DEADLINE_MS} ms deadlines; {WARMUP_S:.0f} s warm-up (every model called once) + "
                 f"{args.seconds:.0f} s measured, {n} arrivals in the trace.", "",
                 "| policy | admitted in time | sent / rejected at admission / late / dropped / errors | p99 ms | "
                 "host hit ratio | cold loads (misses + joins) | loads/s | GB loaded | pre-warms / expirations | "
                 "mean idle resident MB | upload of all models | admitted then missed, by cause: load late / "
                 "room wait / evicted after admission / after the load / lane | by how: rejected after the load / "
                 "dropped / ended late / no weights |",
                 "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            lines.append(f"| {r['policy']} | {100 * r['attainment']:.2f}% | {r['sent']} / {r['rejected_early']} / "
                         f"{r['late']} / {r['dropped']} / {r['errors']} | {r['p99_ms']:.1f} | {r['hit_ratio']:.4f} | "
                         f"{r['cold_loads']:.0f} | {r['loads_per_s']:.1f} | {r['gb_loaded']:.2f} | "
                         f"{r['prewarms']:.0f} / {r['expirations']:.0f} | {r['idle_mb']:.0f} | "
                         f"{r['uploaded']:.0f} in {r['upload_s']:.1f} s | {r['misses']} | {r['misses_how']} |")
        # The target is the default policy's; the others are for comparison.
        results["1"] = [(f"S1 admitted requests in time ({r['policy']})",
                         ">= 99.9%" if r["tag"] == "keepalive" else "none (for comparison)",
                         f"{100 * r['attainment']:.2f}% at {rate:.0f} req/s (70% of {cap:.0f})",
                         r["attainment"] >= 0.999 if r["tag"] == "keepalive" else INFO)
                        for r in rows]
        sections["1"] = lines + commands_lines(ctx, c0)
        earlier = [t for t in S1_POLICIES if t not in policies]
        if earlier:
            table, notes, summary = s1_earlier(old_sections.get("1", []), old_rows.get("1", []), earlier)
            # One table and summary in S1_POLICIES order, the kept rows in the others' places
            # (a kept summary row is the doc's line as it was).
            at = lines.index("|---|---|---|---|---|---|---|---|---|---|---|---|---|") + 1
            table_now = dict(zip((r["tag"] for r in rows), lines[at:at + len(rows)]))
            summary_now = dict(zip((r["tag"] for r in rows), results["1"]))
            table_now.update(table)
            summary_now.update(summary)
            sections["1"] = (lines[:at] + [table_now[t] for t in S1_POLICIES if t in table_now] + notes +
                             sections["1"][len(lines):])
            results["1"] = [summary_now[t] for t in S1_POLICIES if t in summary_now]
    if "2" in only:
        lb, started, c0 = begin()
        c = s2_cold(ctx, args.cold_cycles)
        if c is None:
            results["2"] = [("S2 cold start", "within 1.2x of bytes / disk bandwidth + one inference",
                             "SKIP: no ResNet-50 export (bench/run_real_models.sh exports it)", None)]
            sections["2"] = ["### S2 cold start", "", run_line(lb, started), "", "Skipped: no ResNet-50 export."]
        else:
            lines = ["### S2 cold start", "", run_line(lb, started), "",
                     f"ResNet-50 (`~/.cache/orrery-bench/models/resnet50`), evicted from the host cache before "
                     f"each cycle (`orrery-loadgen --cold-start {args.cold_cycles}`). Disk: "
                     f"{c['disk_bps'] / 1e6:.0f} MB/s (dd O_DIRECT, 1 MiB blocks, same file system, median of 3); "
                     f"the loader's learned bandwidth at the end {c['loader_bps'] / 1e6:.0f} MB/s. Bound = segment "
                     f"bytes / disk bandwidth + the warm request that follows (client-side, ms).", "",
                     "| cycle | segment MB | request to response | predicted (load + warm run) | "
                     "bound | ratio to bound | load waited / predicted | warm request |",
                     "|---|---|---|---|---|---|---|---|"]
            ratios = []
            for i, r in enumerate(c["runs"]):
                bound = r["segment_bytes"] / c["disk_bps"] * 1e3 + r["warm_ms"]
                pred = r["load_predicted_ms"] + r["warm_lane_ms"]
                ratios.append(r["cold_ms"] / bound)
                lines.append(f"| {i} | {r['segment_bytes'] / 1e6:.1f} | {r['cold_ms']:.1f} | {pred:.1f} | "
                             f"{bound:.1f} | {r['cold_ms'] / bound:.2f} | {r['load_wait_ms']:.1f} / "
                             f"{r['load_predicted_ms']:.1f} | {r['warm_ms']:.1f} |")
            ort = c["ort"]
            lines += ["", "ONNX Runtime (onnxruntime-node, 1 intra-op thread, the ONNX file dropped from the page "
                      "cache first): session creation + first run " +
                      ", ".join(f"{o['create_ms']:.0f} + {o['first_run_ms']:.0f} = {o['total_ms']:.0f} ms"
                                for o in ort) + "."]
            med = statistics.median(ratios)
            results["2"] = [("S2 cold start vs bytes / disk bandwidth + one inference", "<= 1.2x (median of cycles)",
                             f"{med:.2f}x (cycles {', '.join(f'{x:.2f}' for x in ratios)}); ORT cold "
                             f"{statistics.median(o['total_ms'] for o in ort):.0f} ms vs Orrery "
                             f"{statistics.median(r['cold_ms'] for r in c['runs']):.0f} ms", med <= 1.2)]
            sections["2"] = lines + commands_lines(ctx, c0)
    if "3" in only:
        lb, started, c0 = begin()
        cap, rate, n, sm = s3_device(ctx, models_dir, args.s3_seconds)
        v, t = sm["server"], sm["total"]
        w = v.get("device_window_seconds", 0)
        if w <= 0:
            raise RuntimeError("s3: no device stats in the loadgen summary (orreryd without --sim-device?)")
        link_u, dev_u, both_u = v["device_transfer_seconds"] / w, v["device_busy_seconds"] / w, \
            v["device_overlap_seconds"] / w
        working = int(sum(os.path.getsize(os.path.join(models_dir, f"m{i:04d}.onnx")) for i in range(S3_MODELS))
                      * ratio)
        admitted = t["sent"] - t["rejected_early"]
        lines = ["### S3 simulated accelerator", "", run_line(lb, started), "",
                 f"{S3_MODELS} of the MLPs over {S3_TENANTS} tenants (model i of tenant i % {S3_TENANTS}), "
                 f"`--sim-device {S3_DEVICE}`: {fmt_mb(S3_DEVICE_MEMORY)} of device memory against a working set of "
                 f"~{fmt_mb(working)} of segments (estimated as for S1), so transfers go on all the time. CPU lanes' "
                 f"capacity without the device (one request outstanding per tenant): {cap:.0f} req/s; offered "
                 f"{rate:.0f} req/s (70%), Poisson, Zipf(1.0) over ranks reshuffled every {S3_PHASE_S:g} s "
                 f"(the hot set moves), {DEADLINE_MS} ms deadlines; "
                 f"{S3_WARMUP_S:.0f} s warm-up (every model called once) + {args.s3_seconds:.0f} s measured, {n} "
                 f"arrivals. Utilisations are the server's summed measured busy time over the measured window "
                 f"({w:.1f} s): link = transfers, device = held compute time of device runs; both = the time a "
                 f"transfer and a device run were under way at once.", "",
                 "| admitted in time | sent / rejected at admission / late / dropped / errors | p99 ms | "
                 "placed device / CPU | transfers finished / pre-warms started | MB moved | link busy | device busy | "
                 "both busy (share of link busy) | fair reorders |",
                 "|---|---|---|---|---|---|---|---|---|---|",
                 f"| {100 * t['attainment']:.2f}% | {t['sent']} / {t['rejected_early']} / {t['late']} / "
                 f"{t['rejected_late']} / {t['errors']} | {t['p99_ms']:.1f} | {v['device_placed']:.0f} / "
                 f"{v['device_placed_cpu']:.0f} | {v['device_transfers']:.0f} / {v['device_prewarms']:.0f} | "
                 f"{v['device_bytes_transferred'] / 1e6:.0f} | {100 * link_u:.1f}% | {100 * dev_u:.1f}% | "
                 f"{100 * both_u:.1f}% ({100 * both_u / link_u if link_u else 0:.0f}%) | "
                 f"{v['device_fair_reordered']:.0f} |", "",
                 f"Late requests: {t['late']} of {admitted} admitted answered after their deadline at the client "
                 f"(and {t['rejected_late']} dropped before running). On the device (server side: the run ended "
                 f"after the deadline): {v['device_late']:.0f}, of which {v['device_late_slow_transfer']:.0f} "
                 f"waited for weights arriving over 1 ms after their placement predicted, "
                 f"{v.get('device_late_overrun', 0):.0f} began over 1 ms after their planned start or ran over "
                 f"1 ms longer than predicted "
                 f"(the simulated device executes on the shared host CPU) and "
                 f"**{v['device_late_unplanned_transfer']:.0f} waited for a transfer the scheduler did not plan** "
                 f"(one queued after the request's placement that went onto the link before its weights arrived; "
                 f"{v['device_waited_unplanned_transfer']:.0f} device runs waited for such a transfer at all). "
                 f"Requests on the CPU lanes wait for no transfer (their weights are in host RAM)."]
        unplanned = v["device_late_unplanned_transfer"]
        results["3"] = [
            ("S3 link and device busy at once", "both utilisations reported, overlap > 0",
             f"link {100 * link_u:.1f}%, device {100 * dev_u:.1f}%, both {100 * both_u:.1f}%", both_u > 0),
            ("S3 misses caused by an unplanned transfer", "0",
             f"{unplanned:.0f} (admitted in time {100 * t['attainment']:.2f}%; device runs late "
             f"{v['device_late']:.0f})", unplanned == 0)]
        sections["3"] = lines + commands_lines(ctx, c0)
    if "4" in only:
        lb, started, c0 = begin()
        idle = idle_rss(ctx.orreryd)
        sv, first, peak, parts = s4_memory(ctx, models_dir, args.count, budget)
        v = sv["server"]
        overhead = idle + ROCKSDB_BYTES + SERVING_MARGIN_BYTES
        bound = budget + overhead
        lines = ["### S4 memory bound", "", run_line(lb, started), "",
                 f"The {args.count} models called round robin, twice (150 req/s, no deadline; nearly every request "
                 f"a miss: {v['host_misses']:.0f} misses, {v['host_loads']:.0f} loads, "
                 f"{v['host_bytes_loaded'] / 1e9:.2f} GB loaded), `--host-cache-bytes {budget}` "
                 f"({fmt_mb(budget)}), `--calibrate-uploads false`. orreryd RSS: {fmt_mb(first)} when first seen, "
                 f"peak (VmHWM, whole life including the uploads) {fmt_mb(peak)}; peak - budget = "
                 f"{fmt_mb(peak - budget)}. Bound = budget + fixed overhead = {fmt_mb(budget)} + {fmt_mb(overhead)} "
                 f"= {fmt_mb(bound)}, the overhead being an idle orreryd's RSS with no models ({fmt_mb(idle)}, "
                 f"measured just before) + RocksDB's configured memory ({fmt_mb(ROCKSDB_BYTES)}: memtables + block "
                 f"cache) + {fmt_mb(SERVING_MARGIN_BYTES)} for serving (pooled run states of resident models, malloc "
                 f"arenas, thread stacks, gRPC buffers; this margin is the script's choice). Upload of "
                 f"{v['models_uploaded']:.0f} models without calibration: {v['upload_seconds']:.1f} s.", "",
                 "Resident memory by kind at the highest RSS sampled (/proc/PID/smaps, kinds from the mappings' "
                 "sizes and names):", "", "| kind | MiB |", "|---|---|"]
        for k, b in sorted(parts.items(), key=lambda kv: -kv[1]):
            lines.append(f"| {k} | {b / (1 << 20):.0f} |")
        lines.append(f"| total | {sum(parts.values()) / (1 << 20):.0f} |")
        results["4"] = [("S4 peak RSS while cycling the models",
                         f"<= budget + idle RSS + RocksDB + {fmt_mb(SERVING_MARGIN_BYTES)} = {fmt_mb(bound)}",
                         f"{fmt_mb(peak)} (budget + {fmt_mb(peak - budget)})", peak <= bound)]
        sections["4"] = lines + commands_lines(ctx, c0)
    print("\n=== cache scenario results ===")
    failed = 0
    for n in SCENARIOS:
        for name, target, got, ok in (x for x in results.get(n, []) if not isinstance(x, str)):
            verdict = verdict_word(ok)
            failed += ok is False
            print(f"{verdict:4}  {name}: target {target}, got {got}")
    if args.doc:
        body = ["<!-- cache-scenarios:begin -->", "## Host cache and device scenarios (issue 7)", "",
                "Written by `bench/run_cache_scenarios.sh`; `--only` re-runs some scenarios and keeps the others' "
                "rows and sections as they were (each section says when and at which commit it ran). Each run "
                "starts its own orreryd (default flags besides those named) on loopback; orrery-loadgen runs on "
                "the same machine.", "",
                "| scenario | target | result | verdict |", "|---|---|---|---|"]
        for n in SCENARIOS:
            if n in results:
                for x in results[n]:
                    if isinstance(x, str):  # kept as it was (s1_earlier)
                        body.append(x)
                        continue
                    name, target, got, ok = x
                    body.append(f"| {name} | {target} | {got} | "
                                f"{'**FAIL**' if ok is False else verdict_word(ok)} |")
            else:
                body += old_rows.get(n, [])
        body.append("")
        for n in SCENARIOS:
            if n in sections:
                body += [f"<!-- cache-s{n}:begin -->"] + sections[n] + [f"<!-- cache-s{n}:end -->", ""]
            elif n in old_sections:
                body += old_sections[n] + [""]
        body.append("<!-- cache-scenarios:end -->")
        replace_block(args.doc, "cache-scenarios", body)
        print(f"wrote {args.doc}")
    sys.exit(1 if failed else 0)


def verdict_word(ok):
    """A result's verdict: True PASS, False FAIL, None SKIP, INFO a number
    without a target."""
    return "INFO" if ok is INFO else ("SKIP" if ok is None else ("PASS" if ok else "FAIL"))


def commands_lines(ctx, first):
    """The orrery-loadgen commands a scenario ran (`$B` = the build dir)."""
    cmds = [c.replace(ctx.build.rstrip("/") + "/", "$B/") for c in ctx.commands[first:]]
    return ["", "Commands (`$B` = the build dir; CSV / JSON per run in the output dir):", "", "```"] + cmds + ["```"]


if __name__ == "__main__":
    main()
