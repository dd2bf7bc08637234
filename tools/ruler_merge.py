#!/usr/bin/env python3
"""Adds policies to stored RULER sweep rows from a later run on the same samples, so that a
changed or added policy does not cost a point's whole re-run (a 4K point of 13 policies is ~10
minutes of prefill and replies on 2 cores; a 32K one hours).

    hybridgen sweep SWEEP.yaml --dry-run > points.txt        # the points as the sweep now lists them
    hybridgen eval --task ruler --json --length L --tasks T --samples N --policy full,NEW... > run.json
    tools/ruler_merge.py ROWS.jsonl --points points.txt --run run.json [--run ...] \\
        [--rename 'OLD->NEW' ...] -o MERGED.jsonl

For each stored row, the point of the same length, task and sample count in points.txt gives the
new policy list (and the row's new key, so that `sweep --resume` counts the row as done). Each
policy of that list comes from a run of that length and task when a run has it, else from the
stored row (after --rename, which corrects what a stored entry's name means, e.g. a default that
changed since it ran). A run must share at least one policy with the row that replied the same
in every sample: that shows it ran the same samples, prompts and prefill (the sweep's seed). Stored
policies the new list lacks are dropped. Each merged row says so under "merged" (a row merged
again keeps the earlier record under "merged"."earlier"). Rows without a
matching run pass through unchanged; a point whose run is missing for a row is an error only with
--require-all.
"""
import argparse
import json
import sys


def fail(msg):
    sys.exit(f"ruler_merge.py: {msg}")


def read_points(path):
    """(length, task, samples) -> (key, [policy names]) from `hybridgen sweep --dry-run`."""
    points = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            words = line.split()
            if len(words) < 3 or not words[0].isdigit():
                continue
            fields = dict(w.split("=", 1) for w in words[2:] if "=" in w)
            if not {"length", "tasks", "samples", "policy"} <= fields.keys():
                continue
            where = (int(fields["length"]), fields["tasks"], int(fields["samples"]))
            points[where] = (words[1], fields["policy"].split(","))
    if not points:
        fail(f"{path}: no points (expected the output of `hybridgen sweep FILE --dry-run`)")
    return points


def renamed(name, renames):
    return renames.get(name, name)


def merge_row(row, run, point, renames, note=None):
    m = row["metrics"]
    key, names = point
    original = [p["policy"] for p in m["policies"]]
    stored = {renamed(p["policy"], renames): p for p in m["policies"]}
    fresh = {p["policy"]: p for p in run["policies"]}
    answers, run_answers = m["answers"], run["answers"]
    if len(answers) != len(run_answers):
        fail(f"length {m['length']} {m['tasks']}: {len(answers)} stored samples, {len(run_answers)} in the run")
    for a, b in zip(answers, run_answers):
        if (a["index"], a["task"], a["answers"]) != (b["index"], b["task"], b["answers"]):
            fail(f"length {m['length']} {a['task']}: sample {a['index']} differs from the run's (another seed?)")
    # the stored replies and scores under the corrected names
    old = [({renamed(k, renames): v for k, v in a["replies"].items()},
            {renamed(k, renames): v for k, v in a["scores"].items()}) for a in answers]
    shared = [n for n in fresh if n in stored]
    same = [n for n in shared if all(o[0][n] == b["replies"][n] for o, b in zip(old, run_answers))]
    if not same:
        fail(f"length {m['length']} {m['tasks']}: no policy of the run replied as the stored row did in every "
             f"sample (shared: {', '.join(shared) or 'none'}): not the same samples or prefill")
    policies = []
    for n in names:
        if n in fresh:
            policies.append(fresh[n])
        elif n in stored:
            policies.append(dict(stored[n], policy=n))
        else:
            fail(f"length {m['length']} {m['tasks']}: '{n}' is neither in the stored row nor in the run")
    for a, b, (replies, scores) in zip(answers, run_answers, old):
        a["replies"] = {n: (b["replies"] if n in fresh else replies)[n] for n in names}
        a["scores"] = {n: (b["scores"] if n in fresh else scores)[n] for n in names}
    m["policies"] = policies
    row["params"]["policy"] = ",".join(names)
    row["key"] = key
    merged = {
        "from_run": [n for n in names if n in fresh],
        "renamed": {o: n for o, n in renames.items() if o in original},
        "dropped": [n for n in stored if n not in names],
        "checked": f"{', '.join(same)} replied the same in all {len(answers)} samples",
    }
    if note:
        merged["note"] = note
    if "merged" in row:  # a row merged before keeps that record, the latest on top
        merged["earlier"] = row["merged"]
    row["merged"] = merged
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rows", help="the sweep's results file (JSON lines)")
    ap.add_argument("--points", required=True, help="`hybridgen sweep FILE --dry-run` output")
    ap.add_argument("--run", action="append", default=[], help="`hybridgen eval --task ruler --json` output")
    ap.add_argument("--rename", action="append", default=[], help="OLD->NEW: a stored policy's corrected name")
    ap.add_argument("--note", help="kept in each merged row (what ran the new policies, when)")
    ap.add_argument("--require-all", action="store_true", help="every ruler row must have a run")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args(argv)
    renames = {}
    for r in args.rename:
        if "->" not in r:
            fail(f"--rename {r!r}: expected OLD->NEW")
        old, new = r.split("->", 1)
        renames[old] = new
    points = read_points(args.points)
    runs = {}
    for path in args.run:
        with open(path, encoding="utf-8") as f:
            run = json.load(f)
        if len(run.get("tasks", [])) != 1:
            fail(f"{path}: a run of one task per file, as the sweep's points")
        runs[(run["length"], run["tasks"][0], run["samples"])] = run
    out, merged = [], 0
    with open(args.rows, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            m = row.get("metrics", {})
            if row.get("task") != "ruler" or row.get("status") != "ok" or len(m.get("tasks", [])) != 1:
                out.append(row)
                continue
            where = (m["length"], m["tasks"][0], m["samples"])
            if where not in runs:
                if args.require_all:
                    fail(f"no run for length {where[0]} {where[1]} ({where[2]} samples)")
                out.append(row)
                continue
            if where not in points:
                fail(f"length {where[0]} {where[1]} ({where[2]} samples) is not a point of {args.points}")
            row = merge_row(row, runs[where], points[where], renames, args.note)
            out.append(row)
            merged += 1
    with open(args.output, "w", encoding="utf-8") as f:
        for row in out:
            f.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"{args.output}: {merged} of {len(out)} rows merged")


if __name__ == "__main__":
    main()
