#!/usr/bin/env python3
"""Figures of a sweep's results (JSON Lines written by `hybridgen sweep`).

    plot_sweep.py OUT.jsonl [OUT2.jsonl ...] -o DIR

Draws, from whatever the rows carry (rows with "status": "error" are skipped):
  decode_vs_depth.png    bench: decode tokens/s vs context depth, one line per policy/setting
  decode_per_policy.png  bench without a depth axis: decode tokens/s per setting (bars)
  accuracy_vs_k.png      fidelity/passkey/ppl with a K axis (k or k-min): agreement, KL, ppl or
                         passkey accuracy vs K, one line per other setting
  accuracy_per_policy.png  the same per setting (bars) when there is no K axis
  sched_trace.png        rows with a scheduler trace ("sched": {"trace": [...]}): K and the
                         selection mode vs decode step
  passkey_heatmap.png    passkey: accuracy over depth x context, one panel per setting
  ruler_vs_length.png    ruler: mean RULER score vs length, one line per entry of the policy
                         list (entries matched by position: budgets may scale with the length),
                         error bars the 95% intervals; one panel per task beside it
  ruler_table.md         ruler: the same as a table, per length: score and 95% interval per
                         task and the mean, per policy
A length's ruler rows split by task (a sweep with a `tasks` axis, so that it resumes task by
task) are pooled into one: its tasks side by side, the mean over every sample of every task
recomputed from the per-sample scores, as the eval computes it.
Repeats of a point are averaged (error bars: their standard deviation). Each figure names the
sweep, the machine (CPU model) and the hybridgen commit. Prints the files it wrote, one a line.
Needs matplotlib (Debian: python3-matplotlib, installed by scripts/setup.sh).
"""
import argparse
import json
import math
import os
import sys
import textwrap

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:  # pragma: no cover - depends on the machine
    sys.exit("plot_sweep.py: matplotlib is missing (apt-get install python3-matplotlib, or scripts/setup.sh)")

K_KEYS = ("k", "k-min")
DEPTH_KEYS = ("depth",)


def load_rows(paths):
    rows, errors = [], 0
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    sys.exit(f"{path}:{n}: not a JSON line ({e})")
                if row.get("status") != "ok":
                    errors += 1
                    continue
                rows.append(row)
    return rows, errors


def value_text(v):
    if isinstance(v, list):
        return ",".join(value_text(x) for x in v)
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def varying_keys(rows):
    """Parameter keys whose values differ between rows, in first-seen order."""
    seen, values = [], {}
    for r in rows:
        for k, v in r.get("params", {}).items():
            if k not in values:
                seen.append(k)
                values[k] = set()
            values[k].add(json.dumps(v, sort_keys=True))
    n = len(rows)
    return [k for k in seen if len(values[k]) > 1 or sum(k in r.get("params", {}) for r in rows) < n]


def follows(rows, key, x_key):
    """True when `key` is a function of `x_key` (zipped with it, e.g. ctx beside depth): one series."""
    seen = {}
    for r in rows:
        p = r.get("params", {})
        x, v = json.dumps(p.get(x_key)), json.dumps(p.get(key))
        if seen.setdefault(x, v) != v:
            return False
    return True


def label(row, keys):
    parts = []
    for k in keys:
        if k in row.get("params", {}):
            v = value_text(row["params"][k])
            parts.append(v if k == "policy" else f"{k}={v}")
    return " ".join(parts) if parts else row.get("sweep", "all")


def footer(fig, rows):
    # every machine and commit the rows ran on, in order, once each
    machines = list(dict.fromkeys(
        f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores, device {m.get('device', '?')}"
        for m in (row.get("machine", {}) for row in rows)))
    commits = list(dict.fromkeys(row.get("hybridgen", {}).get("commit", "?") for row in rows))
    shown = ", ".join(commits[:4]) + (f" and {len(commits) - 4} more" if len(commits) > 4 else "")
    text = f"{'; '.join(machines)}; hybridgen {shown}; {len(rows)} rows"
    fig.text(0.01, 0.005, text, fontsize=7, color="0.35", ha="left", va="bottom")


def mean_std(values):
    m = sum(values) / len(values)
    if len(values) < 2:
        return m, 0.0
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def series(rows, x_key, y_of, label_keys):
    """{label: [(x, mean, std), ...]} averaging the repeats of each (label, x)."""
    groups = {}
    for r in rows:
        y = y_of(r)
        x = r.get("params", {}).get(x_key) if x_key else None
        if y is None or (x_key and x is None):
            continue
        groups.setdefault(label(r, label_keys), {}).setdefault(json.dumps(x), []).append(float(y))
    out = {}
    for name, by_x in groups.items():
        pts = [(json.loads(x), *mean_std(v)) for x, v in by_x.items()]
        out[name] = sorted(pts, key=lambda p: (p[0] is None, p[0]))
    return out


def metric(name):
    def get(r):
        v = r.get("metrics", {}).get(name)
        return v if isinstance(v, (int, float)) else None

    return get


def save(fig, out_dir, name, written):
    path = os.path.join(out_dir, name)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)


def title(rows, what):
    r = rows[0]
    return "\n".join(textwrap.wrap(f"{r.get('sweep', '?')} ({r.get('task', '?')}): {what}", 64))


def plot_lines(ax, data, xlabel, ylabel, logx=False):
    for name, pts in data.items():
        xs = [p[0] for p in pts]
        ax.errorbar(xs, [p[1] for p in pts], yerr=[p[2] for p in pts], marker="o", capsize=3, label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logx:
        ax.set_xscale("log", base=2)
    ax.grid(True, alpha=0.3)
    if len(data) > 1:
        ax.legend(fontsize=8)


def plot_bars(ax, data, xlabel, first=True):
    """Horizontal bars, one a setting, top to bottom in the rows' order: the settings' names (a
    policy and its knobs) are long, and read level on the y axis. Panels after the first share
    its y axis (first=False): they neither name nor flip it again."""
    names = list(data)
    means = [data[n][0][1] for n in names]
    stds = [data[n][0][2] for n in names]
    ax.barh(range(len(names)), means, xerr=stds, capsize=3, color="C0")
    if first:
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels(names, fontsize=8)
        ax.invert_yaxis()
    else:
        ax.tick_params(labelleft=False)
    ax.set_xlabel(xlabel)
    ax.grid(True, axis="x", alpha=0.3)


def bars_height(data):
    return max(3.0, 0.28 * len(data) + 1.6)


def bench_figures(rows, out_dir, written):
    rows = [r for r in rows if metric("decode_tps")(r) is not None]
    if not rows:
        return
    keys = varying_keys(rows)
    x_key = next((k for k in DEPTH_KEYS if k in keys), None)
    labels = [k for k in keys if k != x_key and not (x_key and follows(rows, k, x_key))]
    if x_key:
        xs = [r["params"][x_key] for r in rows if isinstance(r.get("params", {}).get(x_key), (int, float))]
        fig, ax = plt.subplots(figsize=(7, 4.5))
        plot_lines(ax, series(rows, x_key, metric("decode_tps"), labels), "context depth (tokens)",
                   "decode throughput (tokens/s)", logx=bool(xs) and min(xs) > 0 and max(xs) >= 8 * min(xs))
        ax.set_title(title(rows, "decode tokens/s vs context depth"))
        footer(fig, rows)
        save(fig, out_dir, "decode_vs_depth.png", written)
    else:
        data = series(rows, None, metric("decode_tps"), labels)
        fig, ax = plt.subplots(figsize=(8, bars_height(data)))
        plot_bars(ax, data, "decode throughput (tokens/s)")
        ax.set_title(title(rows, "decode tokens/s per setting"))
        footer(fig, rows)
        save(fig, out_dir, "decode_per_policy.png", written)


ACCURACY_METRICS = [
    ("top1_agreement", "top-1 agreement with full attention"),
    ("kl_mean", "mean KL(full || policy) (nats)"),
    ("accuracy", "passkey accuracy (fraction of trials)"),
    ("ppl", "perplexity"),
]


def accuracy_figures(rows, out_dir, written):
    present = [(m, y) for m, y in ACCURACY_METRICS if any(metric(m)(r) is not None for r in rows)]
    if not present:
        return
    if any(m == "top1_agreement" for m, _ in present):  # the reference's own ppl adds nothing here
        present = [(m, y) for m, y in present if m != "ppl" or len(present) < 3]
    keys = varying_keys(rows)
    # K is the x axis only when every row has one (a sweep over policies gives some rows none).
    x_key = next((k for k in K_KEYS if k in keys and all(k in r.get("params", {}) for r in rows)), None)
    labels = [k for k in keys if k != x_key]
    if x_key:
        fig, axes = plt.subplots(1, len(present), figsize=(max(7.0, 4.6 * len(present)), 4.5), squeeze=False)
    else:  # one row of bars per setting, the names once, on the left
        height = bars_height(series(rows, None, metric(present[0][0]), labels))
        fig, axes = plt.subplots(1, len(present), figsize=(4.0 + 3.2 * len(present), height), squeeze=False,
                                 sharey=True)
    for i, (ax, (m, ylabel)) in enumerate(zip(axes[0], present)):
        if x_key:
            plot_lines(ax, series(rows, x_key, metric(m), labels), f"K ({x_key}: host tokens per kv-head)", ylabel,
                       logx=True)
        else:
            plot_bars(ax, series(rows, None, metric(m), labels), ylabel, first=i == 0)
    what = f"accuracy vs {x_key}" if x_key else "accuracy per setting"
    fig.suptitle(title(rows, what))
    footer(fig, rows)
    save(fig, out_dir, "accuracy_vs_k.png" if x_key else "accuracy_per_policy.png", written)


def sched_traces(rows):
    """(label, trace) for every row that carries a scheduler trace, in a bench row or the metrics."""
    keys = varying_keys(rows)
    out = []
    for r in rows:
        m = r.get("metrics", {})
        candidates = [m] + [x for x in m.get("rows", []) if isinstance(x, dict)]
        for c in candidates:
            trace = c.get("sched", {}).get("trace") if isinstance(c.get("sched"), dict) else None
            if trace:
                out.append((label(r, keys), trace))
                break
    return out


def sched_figure(rows, out_dir, written):
    traces = sched_traces(rows)
    if not traces:
        return
    fig, (ax_k, ax_m) = plt.subplots(2, 1, figsize=(7.5, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    for name, trace in traces:
        steps = [e.get("step", i) for i, e in enumerate(trace)]
        ax_k.step(steps, [e.get("k", e.get("K")) for e in trace], where="post", label=name)
        modes = [1 if str(e.get("select", "post")).lower().startswith("pre") else 0 for e in trace]
        ax_m.step(steps, modes, where="post", label=name)
    ax_k.set_ylabel("K (host tokens per kv-head)")
    ax_k.grid(True, alpha=0.3)
    ax_k.legend(fontsize=8)
    ax_m.set_yticks([0, 1])
    ax_m.set_yticklabels(["Post-QK", "Pre-QK"])
    ax_m.set_ylabel("selection")
    ax_m.set_xlabel("decode step")
    ax_m.grid(True, alpha=0.3)
    ax_k.set_title(title(rows, "scheduler trace: K and selection mode per step"))
    footer(fig, rows)
    save(fig, out_dir, "sched_trace.png", written)


def passkey_heatmap(rows, out_dir, written):
    rows = [r for r in rows if isinstance(r.get("metrics", {}).get("per_depth"), dict)]
    if not rows:
        return
    keys = [k for k in varying_keys(rows) if k != "ctx"]
    panels = {}
    for r in rows:
        ctx = r["metrics"].get("prompt_tokens") or r["params"].get("ctx")
        for depth, acc in r["metrics"]["per_depth"].items():
            panels.setdefault(label(r, keys), {}).setdefault((float(depth), int(ctx)), []).append(float(acc))
    cols = min(4, len(panels))  # rows of at most 4 panels: a dozen presets in one row were unreadable
    nrows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(3.6 * cols + 1.5, 3.6 * nrows + 1.0), squeeze=False,
                             layout="constrained")
    fig.get_layout_engine().set(rect=(0, 0.04, 1, 0.96))
    flat = [ax for row in axes for ax in row]
    for ax in flat[len(panels):]:
        ax.set_visible(False)
    image = None
    for k, (ax, (name, cells)) in enumerate(zip(flat, panels.items())):
        depths = sorted({d for d, _ in cells})
        ctxs = sorted({c for _, c in cells})
        grid = [[mean_std(cells[(d, c)])[0] if (d, c) in cells else float("nan") for c in ctxs] for d in depths]
        image = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto", origin="lower")
        for i, row in enumerate(grid):
            for j, v in enumerate(row):
                if not math.isnan(v):
                    ax.text(j, i, f"{v:.2f}", ha="center", va="center", color="w" if v < 0.6 else "k", fontsize=8)
        ax.set_xticks(range(len(ctxs)))
        ax.set_xticklabels([str(c) for c in ctxs])
        ax.set_yticks(range(len(depths)))
        ax.set_yticklabels([f"{d:g}" for d in depths])
        ax.set_xlabel("context (prompt tokens)")
        if k % cols == 0:
            ax.set_ylabel("depth of the key (fraction of the filler)")
        ax.set_title("\n".join(textwrap.wrap(name, 40)), fontsize=9)
    fig.colorbar(image, ax=flat[:len(panels)], label="passkey accuracy")
    fig.suptitle(title(rows, "passkey accuracy by depth and context"))
    footer(fig, rows)
    path = os.path.join(out_dir, "passkey_heatmap.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)


Z95 = 1.959963984540054


def ruler_score(x):
    """Score (%) and 95% interval of per-sample scores in [0, 1], as src/eval/ruler.cpp's
    ruler_score: Wilson's interval when every sample is 0 or 1, else mean ± 1.96 SE."""
    n = len(x)
    if n == 0:
        return {"score": 0.0, "ci95": [0.0, 0.0], "n": 0}
    mean = sum(x) / n
    if all(v in (0.0, 1.0) for v in x):
        d = 1 + Z95 * Z95 / n
        center = (mean + Z95 * Z95 / (2 * n)) / d
        half = Z95 * math.sqrt(mean * (1 - mean) / n + Z95 * Z95 / (4 * n * n)) / d
        lo, hi = center - half, center + half
    else:
        se = math.sqrt(sum((v - mean) ** 2 for v in x) / (n - 1) / n) if n > 1 else 0.0
        lo, hi = mean - Z95 * se, mean + Z95 * se
    clamp = lambda v: min(1.0, max(0.0, v))
    return {"score": 100 * mean, "ci95": [100 * clamp(min(lo, mean)), 100 * clamp(max(hi, mean))], "n": n}


def pool_ruler_rows(rows):
    """One ruler row per length: rows of the same length (a sweep split by task) pooled, policies
    matched by their place in the list, the mean recomputed from the answers' per-sample scores."""
    by_length = {}
    for r in rows:
        by_length.setdefault(r["metrics"]["length"], []).append(r)
    pooled = []
    for length in sorted(by_length):
        group = by_length[length]
        if len(group) == 1:
            pooled.append(group[0])
            continue
        if any(not all("scores" in a for a in r["metrics"].get("answers", [])) for r in group):
            sys.exit(f"plot_sweep.py: ruler rows of length {length} are split by task but carry no per-sample "
                     "scores to pool (rerun them with this hybridgen)")
        first = group[0]
        names = [p["policy"] for p in first["metrics"]["policies"]]
        tasks, per_policy, samples = [], [dict() for _ in names], [[] for _ in names]
        for r in group:
            m = r["metrics"]
            if len(m["policies"]) != len(names):
                sys.exit(f"plot_sweep.py: ruler rows of length {length} compare different policy lists")
            for t in m["tasks"]:
                if t not in tasks:
                    tasks.append(t)
            for i, p in enumerate(m["policies"]):
                per_policy[i].update(p["tasks"])
                samples[i] += [a["scores"][p["policy"]] for a in m["answers"]]
        metrics = dict(first["metrics"])
        metrics["tasks"] = tasks
        metrics["samples"] = sorted({r["metrics"]["samples"] for r in group})
        metrics["policies"] = [dict(p, tasks=per_policy[i], mean=ruler_score(samples[i]))
                               for i, p in enumerate(first["metrics"]["policies"])]
        pooled.append(dict(first, metrics=metrics))
    return pooled


def ruler_table(rows, out_dir, written):
    lines = []
    most = max(len(r["metrics"]["tasks"]) for r in rows)
    for r in rows:
        m = r["metrics"]
        # a length whose sweep has not run every task yet: its mean pools fewer tasks, say so
        part = f", {len(m['tasks'])} of {most} tasks so far" if len(m["tasks"]) < most else ""
        lines.append(f"### {m['length']} tokens ({value_text(m['samples'])} samples per task{part})\n")
        # each mean as a share of full's (the target is stated so), when full ran
        full = next((p["mean"]["score"] for p in m["policies"] if p["policy"] == "full"), None)
        share = (lambda p: f" {100 * p['mean']['score'] / full:.0f}% |") if full else (lambda p: "")
        lines.append("| policy | " + " | ".join(m["tasks"]) + " | mean |" + (" of full |" if full else ""))
        lines.append("|---" * (len(m["tasks"]) + 2 + (1 if full else 0)) + "|")
        cell = lambda s: f"{s['score']:.1f} ({s['ci95'][0]:.0f}–{s['ci95'][1]:.0f})" if s else "–"
        for p in m["policies"]:
            lines.append(f"| {p['policy']} | " + " | ".join(cell(p["tasks"].get(t)) for t in m["tasks"]) +
                         f" | **{cell(p['mean'])}** |" + share(p))
        lines.append("")
    path = os.path.join(out_dir, "ruler_table.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    written.append(path)


def ruler_line_names(rows):
    """Line i of the figure: the i-th entry of each (pooled, by length) row's policy list, named by
    its entry at the shortest length that has one (an entry appended to the longer lengths' lists
    starts there)."""
    names = []
    for r in rows:
        names += [p["policy"] for p in r["metrics"]["policies"][len(names):]]
    return names


def ruler_figure(rows, out_dir, written):
    rows = [r for r in rows if isinstance(r.get("metrics", {}).get("policies"), list) and "length" in r["metrics"]]
    if not rows:
        return
    raw_rows = rows
    rows = pool_ruler_rows(rows)
    ruler_table(rows, out_dir, written)
    # a length whose sweep has not run every task yet: its mean pools fewer tasks, say so
    def length_label(n):
        return f"{n // 1024}K" if n % 1024 == 0 else str(n)

    most = max(len(r["metrics"].get("tasks", [])) for r in rows)
    partial = [f"{length_label(r['metrics']['length'])}: {len(r['metrics'].get('tasks', []))} of {most} tasks so far"
               for r in rows if len(r["metrics"].get("tasks", [])) < most]
    tasks = list(rows[0]["metrics"].get("tasks", []))
    names = ruler_line_names(rows)
    panels = ["mean"] + tasks
    cols = min(4, len(panels))
    nrows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.4 * nrows + 1.2), squeeze=False)
    for k, panel in enumerate(panels):
        ax = axes[k // cols][k % cols]
        for i, name in enumerate(names):
            xs, ys, lo, hi = [], [], [], []
            for r in rows:
                ps = r["metrics"]["policies"]
                if i >= len(ps):
                    continue
                s = ps[i]["mean"] if panel == "mean" else ps[i]["tasks"].get(panel)
                if not s:
                    continue
                xs.append(r["metrics"]["length"])
                ys.append(s["score"])
                lo.append(max(0.0, s["score"] - s["ci95"][0]))
                hi.append(max(0.0, s["ci95"][1] - s["score"]))
            if xs:
                # policies that score alike would hide each other: each is nudged sideways a little
                dodge = 2 ** (0.04 * (i - (len(names) - 1) / 2))
                ax.errorbar([x * dodge for x in xs], ys, yerr=[lo, hi], marker="os^vD<>p*hX"[i % 11], ms=4,
                            capsize=2, label=name, lw=1.1)
        ax.set_xscale("log", base=2)
        lengths = sorted({r["metrics"]["length"] for r in rows})
        ax.set_xticks(lengths)
        ax.set_xticklabels([length_label(n) for n in lengths], fontsize=8)
        ax.set_ylim(-3, 103)
        mean_title = "mean over tasks" + (f" ({'; '.join(partial)})" if partial else "")
        ax.set_title(mean_title if panel == "mean" else panel, fontsize=9)
        ax.set_xlabel("length (tokens)", fontsize=8)
        ax.grid(True, alpha=0.3)
        if k == 0:
            ax.set_ylabel("RULER score (%)")
    for k in range(len(panels), nrows * cols):
        axes[k // cols][k % cols].axis("off")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=7, bbox_to_anchor=(0.5, 0.02))
    fig.suptitle(title(rows, "RULER score vs length (policies by their place in the list; "
                             "names as at the shortest length)"))
    fig.tight_layout(rect=(0, 0.04 + 0.025 * ((len(names) + 2) // 3), 1, 0.95))
    footer(fig, raw_rows)
    path = os.path.join(out_dir, "ruler_vs_length.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", nargs="+", help="JSONL results of hybridgen sweep")
    ap.add_argument("-o", "--out", required=True, help="directory for the PNG files")
    a = ap.parse_args(argv)
    rows, errors = load_rows(a.results)
    if not rows:
        sys.exit(f"plot_sweep.py: no finished rows in {', '.join(a.results)} ({errors} error rows)")
    os.makedirs(a.out, exist_ok=True)
    written = []
    bench_figures(rows, a.out, written)
    accuracy_figures(rows, a.out, written)
    sched_figure(rows, a.out, written)
    passkey_heatmap(rows, a.out, written)
    ruler_figure(rows, a.out, written)
    if not written:
        sys.exit("plot_sweep.py: the rows carry nothing to plot (no decode_tps, accuracy, trace or passkey metrics)")
    for p in written:
        print(p)
    if errors:
        print(f"plot_sweep.py: skipped {errors} error rows", file=sys.stderr)


if __name__ == "__main__":
    main()
