#!/usr/bin/env python3
"""Independent numpy reference of H2O's and Keyformer's cache eviction, for the unit tests.

Reads a JSON case and prints, after every step, the positions each kv-head keeps. The rule is
H2O's (FMInference/H2O h2o_hf/utils_real_drop/modify_llama.py, H2OKVCache_LayerWise): the
whole cache's scores accumulate every query row's attention (probabilities for H2O, a
Gumbel-softmax of the logits for Keyformer), summed over the kv-head's query heads; when the
cache holds more than heavy + window tokens, the last `window` stay and of the others the
`heavy` of largest score (ties: the more recent token). Prefill rows attend causally over the
whole prompt before anything is evicted.

Case fields: n_tokens, prompt_len, n_heads, n_kv_heads, heavy, window, mode ("h2o"|"keyformer"),
logits [n_tokens][n_heads][n_tokens] (row r, head h, key j <= r), and for keyformer
noise (same shape), tau_init, tau_end, ctx.
"""
import json
import sys

import numpy as np


def tau_at(case, pos):
    p, ctx = case["prompt_len"], case["ctx"]
    span = ctx - 1 - p
    if span <= 0 or pos <= p:
        return case["tau_init"]
    f = min(1.0, (pos - p) / span)
    return case["tau_init"] + (case["tau_end"] - case["tau_init"]) * f


def row_scores(case, r, keys, h):
    logits = np.asarray(case["logits"][r][h], dtype=np.float64)[keys]
    p = np.exp(logits - logits.max())
    p /= p.sum()
    if case["mode"] == "h2o":
        return p
    noise = np.asarray(case["noise"][r][h], dtype=np.float64)[keys]
    y = (np.log(p) + noise) / tau_at(case, r)
    y = np.exp(y - y.max())
    return y / y.sum()


def evict(case, kept, score):
    limit = case["heavy"] + case["window"]
    if len(kept) <= limit:
        return kept
    recent = kept[-case["window"]:] if case["window"] > 0 else []
    older = kept[:len(kept) - len(recent)]
    # largest score first, the more recent token first among equals
    ranked = sorted(older, key=lambda j: (-score[j], -j))
    return sorted(ranked[:case["heavy"]] + recent)


def main():
    case = json.load(open(sys.argv[1]))
    n, p = case["n_tokens"], case["prompt_len"]
    group = case["n_heads"] // case["n_kv_heads"]
    out = []
    kept = [list(range(p)) for _ in range(case["n_kv_heads"])]
    score = [np.zeros(n) for _ in range(case["n_kv_heads"])]
    for g in range(case["n_kv_heads"]):
        for r in range(p):
            keys = list(range(r + 1))
            for h in range(g * group, (g + 1) * group):
                score[g][keys] += row_scores(case, r, keys, h)
        kept[g] = evict(case, kept[g], score[g])
    out.append([list(k) for k in kept])
    for t in range(p, n):
        for g in range(case["n_kv_heads"]):
            keys = kept[g] + [t]
            for h in range(g * group, (g + 1) * group):
                score[g][keys] += row_scores(case, t, keys, h)
            kept[g] = evict(case, keys, score[g])
        out.append([list(k) for k in kept])
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
