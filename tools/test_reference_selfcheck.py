#!/usr/bin/env python3
"""Self-check of tools/make_tiny_model.py and tools/reference.py.

Run with plain `python3 tools/test_reference_selfcheck.py`; exits non-zero on
failure.  Needs only numpy (uses the `safetensors` package for an extra
cross-check when it happens to be importable).
"""
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_tiny_model as mk  # noqa: E402
import reference as ref  # noqa: E402

FAILS = []
CHECKS = [0]


def check(cond, msg):
    CHECKS[0] += 1
    if not cond:
        FAILS.append(msg)
        print("FAIL:", msg)


def cfg_of(d):
    with open(os.path.join(d, "config.json")) as f:
        return json.load(f)


def run_all(root):
    ids = list(np.random.default_rng(1).integers(0, 256, size=40))
    ids = [int(i) for i in ids]
    logits = {}

    # ---- format: header layout, contiguity, optional cross-check -------
    for name in mk.VARIANTS:
        d = os.path.join(root, name)
        files = [f for f in os.listdir(d) if f.endswith(".safetensors")]
        for fn in files:
            path = os.path.join(d, fn)
            with open(path, "rb") as f:
                data = f.read()
            n = int(np.frombuffer(data[:8], "<u8")[0])
            check(n % 8 == 0, "%s/%s header length %d not multiple of 8" % (name, fn, n))
            hdr = json.loads(data[8:8 + n])
            check(hdr.get("__metadata__") == {"format": "pt"}, "%s metadata" % name)
            spans = sorted(v["data_offsets"] for k, v in hdr.items() if k != "__metadata__")
            pos = 0
            for b, e in spans:
                check(b == pos, "%s/%s non-contiguous data" % (name, fn))
                pos = e
            check(8 + n + pos == len(data), "%s/%s trailing/missing bytes" % (name, fn))
            for k, v in hdr.items():
                if k == "__metadata__":
                    continue
                isz = {"F32": 4, "F16": 2, "BF16": 2}[v["dtype"]]
                b, e = v["data_offsets"]
                check(e - b == isz * int(np.prod(v["shape"])), "%s %s size" % (name, k))
    try:
        from safetensors.numpy import load_file  # optional
        for name in ("llama-mha", "opt-proj", "qwen2-f16"):
            d = os.path.join(root, name)
            a = load_file(os.path.join(d, "model.safetensors"))
            b = ref.load_weights(d)
            check(set(a) == set(b), "safetensors pkg: names differ for %s" % name)
            for k in a:
                check(np.array_equal(np.asarray(a[k], np.float32), b[k].astype(np.float32)),
                      "safetensors pkg: %s %s differs" % (name, k))
        print("  (cross-checked against the safetensors package)")
    except ImportError:
        pass

    # ---- tensor names per HF ------------------------------------------
    w = ref.load_weights(os.path.join(root, "opt-postln"))
    check("model.decoder.final_layer_norm.weight" not in w, "opt-postln has final_layer_norm")
    check("lm_head.weight" not in w, "opt has lm_head.weight")
    w = ref.load_weights(os.path.join(root, "opt"))
    check("model.decoder.final_layer_norm.weight" in w, "opt lacks final_layer_norm")
    check(w["model.decoder.embed_positions.weight"].shape[0]
          == cfg_of(os.path.join(root, "opt"))["max_position_embeddings"] + 2, "opt pos rows")
    w = ref.load_weights(os.path.join(root, "opt-proj"))
    check(w["model.decoder.project_in.weight"].shape == (64, 32), "project_in shape")
    check(w["model.decoder.project_out.weight"].shape == (32, 64), "project_out shape")
    check(w["model.decoder.embed_tokens.weight"].shape[1] == 32, "opt-proj embed dim")
    w = ref.load_weights(os.path.join(root, "qwen2"))
    check("model.layers.0.self_attn.q_proj.bias" in w and "lm_head.weight" not in w, "qwen2 names")
    check("model.layers.0.self_attn.o_proj.bias" not in w, "qwen2 o_proj has no bias")
    check("lm_head.weight" in ref.load_weights(os.path.join(root, "qwen2-untied")), "qwen2-untied lm_head")
    check("lm_head.weight" in ref.load_weights(os.path.join(root, "llama-mha")), "llama-mha lm_head")
    check("lm_head.weight" not in ref.load_weights(os.path.join(root, "llama-gqa")), "llama-gqa tied")

    # ---- every variant: finite, far from uniform, causal ----------------
    for name in mk.VARIANTS:
        d = os.path.join(root, name)
        w = ref.load_weights(d)
        cfg = cfg_of(d)
        full = ref.forward(d, ids, weights=w, cfg=cfg)
        logits[name] = full
        check(full.shape == (len(ids), cfg["vocab_size"]) and full.dtype == np.float32,
              "%s shape/dtype %s %s" % (name, full.shape, full.dtype))
        check(np.isfinite(full).all(), "%s non-finite" % name)
        sd = full.std(-1).min()
        check(sd > 0.5, "%s logits too flat (std %.3f)" % (name, sd))
        for k in (1, 7, 23):
            part = ref.forward(d, ids[:k], weights=w, cfg=cfg)
            check(np.allclose(part, full[:k], rtol=0, atol=1e-5),
                  "%s causality prefix %d: %g" % (name, k, np.abs(part - full[:k]).max()))
        # a change to a later token must not change earlier rows
        ids2 = list(ids)
        ids2[30] = (ids2[30] + 1) % 256
        alt = ref.forward(d, ids2, weights=w, cfg=cfg)
        check(np.allclose(alt[:30], full[:30], rtol=0, atol=1e-5) and
              not np.allclose(alt[30:], full[30:], atol=1e-3), "%s causality (change)" % name)

    # ---- tied models use the embedding as head --------------------------
    for name, emb in (("llama-gqa", "model.embed_tokens.weight"),
                      ("qwen2", "model.embed_tokens.weight"),
                      ("opt", "model.decoder.embed_tokens.weight"),
                      ("opt-proj", "model.decoder.embed_tokens.weight")):
        d = os.path.join(root, name)
        w = dict(ref.load_weights(d))
        cfg = dict(cfg_of(d))
        check(cfg["tie_word_embeddings"] if "tie_word_embeddings" in cfg else True, "%s tie flag" % name)
        cfg["tie_word_embeddings"] = False
        w["lm_head.weight"] = w[emb].copy()
        same = ref.forward(d, ids, weights=w, cfg=cfg)
        check(np.allclose(same, logits[name], rtol=0, atol=1e-6), "%s tied != explicit head" % name)
        w["lm_head.weight"] = w[emb] * 1.5
        diff = ref.forward(d, ids, weights=w, cfg=cfg)
        check(np.allclose(diff, logits[name] * 1.5, rtol=1e-5, atol=1e-4), "%s head not used linearly" % name)
    # untied flag without lm_head must fail loudly
    d = os.path.join(root, "llama-gqa")
    cfg = dict(cfg_of(d))
    cfg["tie_word_embeddings"] = False
    try:
        ref.forward(d, ids, weights=ref.load_weights(d), cfg=cfg)
        check(False, "missing lm_head not detected")
    except KeyError:
        pass

    # ---- GQA == MHA with repeated kv weights ----------------------------
    for name in ("llama-gqa", "qwen2", "llama3-rope"):
        d = os.path.join(root, name)
        w = ref.load_weights(d)
        cfg = cfg_of(d)
        nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        hd = cfg["hidden_size"] // nh
        rep = nh // nkv
        check(rep > 1, "%s is not GQA" % name)
        for mode in ("repeat", "tile"):
            w2 = dict(w)
            for k, v in w.items():
                if ".k_proj." in k or ".v_proj." in k:
                    v3 = v.reshape(nkv, hd, *v.shape[1:])
                    v3 = np.repeat(v3, rep, 0) if mode == "repeat" else np.tile(v3, (rep,) + (1,) * (v3.ndim - 1))
                    w2[k] = v3.reshape(nh * hd, *v.shape[1:])
            c2 = dict(cfg, num_key_value_heads=nh)
            out = ref.forward(d, ids, weights=w2, cfg=c2)
            eq = np.allclose(out, logits[name], rtol=0, atol=1e-6)
            if mode == "repeat":
                check(eq, "%s GQA != MHA(repeat_kv): %g" % (name, np.abs(out - logits[name]).max()))
            else:
                check(not eq, "%s GQA insensitive to kv-head mapping" % name)

    # ---- bf16 / f16 checkpoints ------------------------------------------
    for name, base, dt in (("llama-gqa-bf16", "llama-gqa", "bf16"), ("qwen2-f16", "qwen2", "f16")):
        d = os.path.join(root, name)
        check(cfg_of(d)["torch_dtype"] == {"bf16": "bfloat16", "f16": "float16"}[dt], "%s torch_dtype" % name)
        with open(os.path.join(d, "model.safetensors"), "rb") as f:
            n = int(np.frombuffer(f.read(8), "<u8")[0])
            hdr = json.loads(f.read(n))
        check(all(v["dtype"] == {"bf16": "BF16", "f16": "F16"}[dt]
                  for k, v in hdr.items() if k != "__metadata__"), "%s dtype tags" % name)
        wl = ref.load_weights(d)
        wb = ref.load_weights(os.path.join(root, base))
        for k in wb:
            exp = ref.round_to(wb[k].astype(np.float32), dt)
            check(np.array_equal(wl[k].astype(np.float32), exp), "%s %s not rounded %s of %s" % (name, k, dt, base))
        dd = np.abs(logits[name] - logits[base]).max()
        check(0 < dd < 0.5, "%s vs %s logits diff %g" % (name, base, dd))
    # bf16 round-to-nearest-even on edge cases
    x = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20, -(1 + 2 ** -8 + 2 ** -20), 3.0e38],
                 dtype=np.float32)
    bits = mk.f32_to_bf16_bits(x)
    back = ref.bf16_bits_to_f32(bits)
    check(np.array_equal(back, np.array([1.0, 1 + 2 ** -6, 1 + 2 ** -7, -(1 + 2 ** -7),
                                         ref.bf16_bits_to_f32(np.array([0x7F62], np.uint16))[0]],
                                        np.float32)), "bf16 RNE: %s" % back)

    # ---- sharded == unsharded ---------------------------------------------
    for name, base in (("llama-mha-sharded", "llama-mha"), ("opt-sharded", "opt")):
        d = os.path.join(root, name)
        with open(os.path.join(d, "model.safetensors.index.json")) as f:
            idx = json.load(f)
        files = sorted(set(idx["weight_map"].values()))
        check(files == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"],
              "%s shard files %s" % (name, files))
        check(not os.path.exists(os.path.join(d, "model.safetensors")), "%s stray model.safetensors" % name)
        ws = ref.load_weights(d)
        wb = ref.load_weights(os.path.join(root, base))
        check(idx["metadata"]["total_size"] == sum(v.nbytes for v in wb.values()), "%s total_size" % name)
        check(set(ws) == set(wb) == set(idx["weight_map"]), "%s names" % name)
        check(all(np.array_equal(ws[k], wb[k]) for k in wb), "%s tensors differ" % name)
        check(np.array_equal(logits[name], logits[base]), "%s logits differ from unsharded" % name)

    # ---- RoPE ---------------------------------------------------------------
    cfg = cfg_of(os.path.join(root, "llama3-rope"))
    hd = cfg["hidden_size"] // cfg["num_attention_heads"]
    inv_s, _ = ref.rope_inv_freq(cfg, hd)
    inv_0, _ = ref.rope_inv_freq(dict(cfg, rope_scaling=None), hd)
    wl = 2 * math.pi / inv_0
    rs = cfg["rope_scaling"]
    hi_wl = rs["original_max_position_embeddings"] / rs["high_freq_factor"]
    lo_wl = rs["original_max_position_embeddings"] / rs["low_freq_factor"]
    high, low = wl < hi_wl, wl > lo_wl
    med = ~high & ~low
    check(high.any() and low.any() and med.any(), "llama3 test config should cover all bands: %s" % wl)
    check(np.array_equal(inv_s[high], inv_0[high]), "llama3: high freqs changed")
    check(np.allclose(inv_s[low], inv_0[low] / rs["factor"], rtol=1e-12), "llama3: low freqs not /factor")
    check(np.all((inv_s[med] < inv_0[med]) & (inv_s[med] > inv_0[med] / rs["factor"])), "llama3: medium not interpolated")
    # hand-computed medium band value: smooth = (old/wl - low)/(high - low)
    s = (64 / wl[med] - 1.0) / 3.0
    check(np.allclose(inv_s[med], (1 - s) * inv_0[med] / 8 + s * inv_0[med], rtol=1e-12), "llama3 medium formula")
    check(np.allclose(inv_0, 1.0 / 500000.0 ** (np.arange(0, hd, 2) / hd), rtol=1e-6), "inv_freq")
    d = os.path.join(root, "llama3-rope")
    w = ref.load_weights(d)
    noscale = ref.forward(d, ids, weights=w, cfg=dict(cfg, rope_scaling=None))
    check(np.allclose(noscale[0], logits["llama3-rope"][0], atol=1e-6), "llama3 rope changes position 0")
    check(np.abs(noscale[1:] - logits["llama3-rope"][1:]).max() > 1e-2, "llama3 scaling has no effect")
    # rotate_half layout: pair (i, i + hd/2) rotated by angle pos * inv_freq[i]
    rng = np.random.default_rng(5)
    xq = rng.standard_normal((2, 9, hd))
    pos = np.arange(9.0)
    ang = pos[:, None] * inv_0[None]
    emb = np.concatenate([ang, ang], -1)
    got = ref.apply_rope(xq, np.cos(emb), np.sin(emb))
    exp = np.empty_like(xq)
    h2 = hd // 2
    for i in range(h2):
        c, s_ = np.cos(ang[:, i]), np.sin(ang[:, i])
        exp[..., i] = xq[..., i] * c - xq[..., i + h2] * s_
        exp[..., i + h2] = xq[..., i + h2] * c + xq[..., i] * s_
    check(np.allclose(got, exp, atol=1e-12), "rotate_half rope layout")

    # ---- OPT learned positions with offset 2 --------------------------------
    d = os.path.join(root, "opt")
    w = dict(ref.load_weights(d))
    cfg = cfg_of(d)
    pe = w["model.decoder.embed_positions.weight"].copy()
    pe[0:2] += 5.0
    pe[2 + len(ids):] += 5.0
    w["model.decoder.embed_positions.weight"] = pe
    check(np.array_equal(ref.forward(d, ids, weights=w, cfg=cfg), logits["opt"]), "OPT uses rows outside 2..T+1")
    pe = pe.copy()
    pe[2] += np.linspace(-1.0, 1.0, pe.shape[1])  # (a constant shift would be cancelled by LayerNorm)
    w["model.decoder.embed_positions.weight"] = pe
    out = ref.forward(d, ids, weights=w, cfg=cfg)
    check(not np.allclose(out[0], logits["opt"][0], atol=1e-3), "OPT row 2 is not position 0")
    # post-LN: last hidden state is LayerNormed inside the last layer
    check(not np.allclose(logits["opt-postln"], logits["opt"], atol=1e-2), "opt-postln == opt")

    # ---- reduced precision KV ----------------------------------------------
    d = os.path.join(root, "llama-gqa")
    kv16 = ref.forward(d, ids, kv_dtype="f16")
    dd = np.abs(kv16 - logits["llama-gqa"]).max()
    check(0 < dd < 0.05, "f16 kv diff %g" % dd)
    f32c = ref.forward(d, ids, compute="f32")
    check(np.abs(f32c - logits["llama-gqa"]).max() < 1e-4, "f32 compute vs f64")

    # ---- CLI -----------------------------------------------------------------
    idf = os.path.join(root, "ids.json")
    with open(idf, "w") as f:
        json.dump(ids, f)
    outp = os.path.join(root, "ref.npy")
    r = subprocess.run([sys.executable, os.path.join(HERE, "reference.py"), os.path.join(root, "qwen2"),
                        "--ids-file", idf, "--out", outp], capture_output=True, text=True)
    check(r.returncode == 0, "reference.py CLI failed: %s" % r.stderr)
    if r.returncode == 0:
        got = np.load(outp)
        check(got.dtype == np.float32 and np.array_equal(got, logits["qwen2"]), "CLI output differs")
    r = subprocess.run([sys.executable, os.path.join(HERE, "reference.py"), os.path.join(root, "opt"),
                        "--ids", json.dumps(ids[:5]), "--out", outp], capture_output=True, text=True)
    check(r.returncode == 0 and np.array_equal(np.load(outp), logits["opt"][:5]), "CLI --ids")
    one = os.path.join(root, "single")
    r = subprocess.run([sys.executable, os.path.join(HERE, "make_tiny_model.py"), one, "--arch", "qwen2",
                        "--variant", "qwen2-untied", "--dtype", "bf16", "--shards", "2", "--seed", "3"],
                       capture_output=True, text=True)
    check(r.returncode == 0 and os.path.exists(os.path.join(one, "model.safetensors.index.json")),
          "make_tiny_model single-variant CLI: %s" % r.stderr)
    # seeds: different seed -> different weights; same seed -> identical files
    mk.make(os.path.join(root, "s1"), "opt", seed=1)
    mk.make(os.path.join(root, "s1b"), "opt", seed=1)
    with open(os.path.join(root, "s1", "model.safetensors"), "rb") as f1, \
            open(os.path.join(root, "s1b", "model.safetensors"), "rb") as f2, \
            open(os.path.join(root, "opt", "model.safetensors"), "rb") as f3:
        a, b, c = f1.read(), f2.read(), f3.read()
    check(a == b and a != c, "seed determinism")

    # long prompt fits max_position_embeddings for all variants
    for name in mk.VARIANTS:
        check(cfg_of(os.path.join(root, name))["max_position_embeddings"] >= 512, "%s max pos" % name)


def main():
    t0 = time.time()
    with tempfile.TemporaryDirectory() as root:
        r = subprocess.run([sys.executable, os.path.join(HERE, "make_tiny_model.py"), "--all", root],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stderr)
            return 1
        t1 = time.time()
        print("make_tiny_model --all: %.2fs" % (t1 - t0))
        run_all(root)
    print("%d checks, %d failures, %.2fs" % (CHECKS[0], len(FAILS), time.time() - t0))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
