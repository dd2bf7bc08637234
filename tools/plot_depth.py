#!/usr/bin/env python3
"""Plot decode cost against context depth from `hybridgen bench -o jsonl` rows (tools/depth_sweep.sh).

usage: plot_depth.py ROWS.jsonl OUT.png [--title TEXT]

Left: decode ms/token per policy against depth (log2 axis), wall time and the process's CPU
time per token (less disturbed on a shared machine); right: host->device bytes per token
and peak RSS. Prints the same data as a markdown table on stdout. Rows of other tests (ppN,
depth 0) are ignored; rows whose depth was filled with random K/V are labelled so in the title.
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0
    return str(n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows")
    ap.add_argument("png")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    rows = []
    with open(a.rows) as f:
        for line in f:
            line = line.strip()
            if line:
                r = json.loads(line)
                if r.get("depth", 0) > 0 and r["test"].startswith("tg"):
                    rows.append(r)
    if not rows:
        sys.exit(f"plot_depth: no decode-at-depth rows in {a.rows}")
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    fills = sorted({r.get("depth_fill", "prefill") for r in rows})

    print("| policy | depth | ms/token | tok/s | CPU ms/token | h2d bytes/token | peak RSS |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        cpu = f"{r['cpu_ms_per_token']:.1f}" if "cpu_ms_per_token" in r else ""
        print(f"| {r['policy']} | {r['depth']} | {1e3 / r['avg_ts']:.1f} | {r['avg_ts']:.2f} | {cpu} | "
              f"{human(r.get('h2d_bytes_per_token', 0))} | {human(r.get('peak_rss_bytes', 0))} |")

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.5))
    for p in policies:
        pr = sorted((r for r in rows if r["policy"] == p), key=lambda r: r["depth"])
        d = [r["depth"] for r in pr]
        line, = ax.plot(d, [1e3 / r["avg_ts"] for r in pr], marker="o", label=f"{p} wall")
        if all("cpu_ms_per_token" in r for r in pr):
            ax.plot(d, [r["cpu_ms_per_token"] for r in pr], marker="x", linestyle=":", color=line.get_color(),
                    label=f"{p} CPU time")
        bx.plot(d, [r.get("peak_rss_bytes", 0) / 2**20 for r in pr], marker="s", label=f"{p} peak RSS")
        h2d = [r.get("h2d_bytes_per_token", 0) / 2**20 for r in pr]
        if any(h2d):
            bx.plot(d, h2d, marker="^", linestyle="--", label=f"{p} h2d/token")
    for x in (ax, bx):
        x.set_xscale("log", base=2)
        x.set_xlabel("context depth (tokens)")
        x.grid(True, which="both", alpha=0.3)
        x.legend(fontsize=8)
    ax.set_yscale("log")  # wall and CPU time differ by orders of magnitude on a shared machine
    ax.set_ylabel("decode ms / token")
    bx.set_ylabel("MiB")
    title = a.title or f"{rows[0]['model']}, {rows[0]['backend']}, {rows[0]['threads']} threads"
    fig.suptitle(f"{title} (depth filled by: {', '.join(fills)})")
    fig.tight_layout()
    fig.savefig(a.png, dpi=110)


if __name__ == "__main__":
    main()
