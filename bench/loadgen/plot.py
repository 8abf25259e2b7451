#!/usr/bin/python3
"""orrery-loadgen's plot: plot.py REQUESTS.csv SUMMARY.csv OUT.png

Left: latency CDF of OK responses per tenant (log x). Middle: latency over
time (OK dots, rejections as crosses at the bottom). Right: service share vs
weight share per tenant.
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: plot.py REQUESTS.csv SUMMARY.csv OUT.png")
    reqs = list(csv.DictReader(open(sys.argv[1])))
    summary = [r for r in csv.DictReader(open(sys.argv[2])) if r["tenant"] != "all"]
    tenants = sorted({r["tenant"] for r in reqs})
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    for t in tenants:
        lat = sorted(float(r["latency_ms"]) for r in reqs if r["tenant"] == t and r["outcome"] in ("ok", "late"))
        if lat:
            axes[0].plot(lat, [(i + 1) / len(lat) for i in range(len(lat))], label=t)
        ok = [r for r in reqs if r["tenant"] == t and r["outcome"] in ("ok", "late")]
        axes[1].scatter([float(r["sent_s"]) for r in ok], [float(r["latency_ms"]) for r in ok], s=2, label=t)
        rej = [r for r in reqs if r["tenant"] == t and r["outcome"].startswith("rejected")]
        if rej:
            axes[1].scatter([float(r["sent_s"]) for r in rej], [0.01] * len(rej), s=6, marker="x")
    axes[0].set_xscale("log")
    axes[0].set_xlabel("latency (ms)")
    axes[0].set_ylabel("fraction of OK responses")
    axes[0].set_title("latency CDF")
    axes[0].legend(fontsize=7)
    axes[1].set_yscale("log")
    axes[1].set_xlabel("send time (s)")
    axes[1].set_ylabel("latency (ms)")
    axes[1].set_title("latency over time (x: rejected)")
    names = [r["tenant"] for r in summary]
    x = range(len(names))
    axes[2].bar([i - 0.2 for i in x], [100 * float(r["service_share"]) for r in summary], 0.4, label="service %")
    axes[2].bar([i + 0.2 for i in x], [100 * float(r["weight_share"]) for r in summary], 0.4, label="weight %")
    axes[2].set_xticks(list(x))
    axes[2].set_xticklabels(names, rotation=30, fontsize=7)
    axes[2].set_title("service vs weight")
    axes[2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(sys.argv[3], dpi=90)


if __name__ == "__main__":
    main()
