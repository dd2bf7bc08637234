#!/usr/bin/env python3
"""Convert a small HF llama / qwen2 checkpoint (config.json + safetensors) to GGUF v3 with the
tensor layout llama.cpp's convert_hf_to_gguf.py writes, so GGUF loading is tested on files made
the way real ones are:

- llama: Wq and Wk permuted per head for interleaved RoPE (pairs (2i, 2i+1) instead of
  (i, i + head_dim/2)); Wk with the kv-head count;
- llama3 rope scaling (config rope_scaling.rope_type == "llama3") written as the tensor
  `rope_freqs.weight`, f32 [head_dim / 2], one divisor per rotary pair: 1 where the wavelength is
  below original_max / high_freq_factor, `factor` above original_max / low_freq_factor, the
  reciprocal of the smooth blend between (the metadata then carries no rope scaling type);
- qwen2: no permutation (llama.cpp rotates Qwen2 in the HF layout), q/k/v biases.

No tokenizer is written (the tests feed token ids), only `<arch>.vocab_size`.

Usage: hf_to_gguf.py HF_DIR OUT.gguf [--outtype f32|f16]
Only numpy is needed; the safetensors reader is tools/reference.py's.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import load_weights  # noqa: E402

ALIGNMENT = 32
# GGUF metadata value types and ggml tensor types used here.
T_UINT32, T_FLOAT32, T_STRING = 4, 6, 8
GGML_F32, GGML_F16 = 0, 1


def permute(w, n_head):
    """llama.cpp's LlamaModel.permute: per head, rows (i, i + hd/2) become adjacent rows (2i, 2i+1)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_factors(cfg, head_dim):
    """The per-pair divisors llama.cpp's converter derives from rope_scaling (type llama3)."""
    rs = cfg.get("rope_scaling") or {}
    if rs.get("rope_type", rs.get("type")) != "llama3":
        return None
    base = float(cfg.get("rope_theta", 10000.0))
    freqs = 1.0 / (np.float32(base) ** (np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim)))
    factor = float(rs.get("factor", 8.0))
    low = float(rs.get("low_freq_factor", 1.0))
    high = float(rs.get("high_freq_factor", 4.0))
    old = float(rs.get("original_max_position_embeddings", 8192))
    low_wavelen, high_wavelen = old / low, old / high
    out = []
    for f in freqs.astype(np.float32):
        wavelen = 2 * math.pi / float(f)
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_kv(key, vtype, value):
    out = gguf_string(key) + struct.pack("<I", vtype)
    if vtype == T_UINT32:
        return out + struct.pack("<I", value)
    if vtype == T_FLOAT32:
        return out + struct.pack("<f", value)
    if vtype == T_STRING:
        return out + gguf_string(value)
    raise ValueError(vtype)


def convert(hf_dir, out_path, outtype="f32"):
    with open(os.path.join(hf_dir, "config.json")) as f:
        cfg = json.load(f)
    arch = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2"}.get((cfg.get("architectures") or [""])[0])
    if arch is None:
        arch = cfg.get("model_type")
    if arch not in ("llama", "qwen2"):
        raise SystemExit("%s: architecture %r is not supported (llama, qwen2)" % (hf_dir, arch))
    w = load_weights(hf_dir)
    H, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads", nh)
    hd = cfg.get("head_dim") or H // nh
    n_layers = cfg["num_hidden_layers"]

    tensors = []  # (name, array); 1-D tensors stay f32 as llama.cpp keeps them

    def add(name, a):
        a = np.asarray(a, dtype=np.float32)
        if outtype == "f16" and a.ndim > 1:
            a = a.astype(np.float16)
        tensors.append((name, np.ascontiguousarray(a)))

    add("token_embd.weight", w["model.embed_tokens.weight"])
    factors = llama3_rope_factors(cfg, hd) if arch == "llama" else None
    if factors is not None:
        tensors.append(("rope_freqs.weight", factors))
    for i in range(n_layers):
        p, b = "model.layers.%d." % i, "blk.%d." % i
        wq, wk = w[p + "self_attn.q_proj.weight"], w[p + "self_attn.k_proj.weight"]
        if arch == "llama":
            wq, wk = permute(wq, nh), permute(wk, nkv)
        add(b + "attn_norm.weight", w[p + "input_layernorm.weight"])
        add(b + "attn_q.weight", wq)
        add(b + "attn_k.weight", wk)
        add(b + "attn_v.weight", w[p + "self_attn.v_proj.weight"])
        if arch == "qwen2":
            for proj, short in (("q", "q"), ("k", "k"), ("v", "v")):
                add(b + "attn_%s.bias" % short, w[p + "self_attn.%s_proj.bias" % proj])
        add(b + "attn_output.weight", w[p + "self_attn.o_proj.weight"])
        add(b + "ffn_norm.weight", w[p + "post_attention_layernorm.weight"])
        add(b + "ffn_gate.weight", w[p + "mlp.gate_proj.weight"])
        add(b + "ffn_up.weight", w[p + "mlp.up_proj.weight"])
        add(b + "ffn_down.weight", w[p + "mlp.down_proj.weight"])
    add("output_norm.weight", w["model.norm.weight"])
    if "lm_head.weight" in w and not cfg.get("tie_word_embeddings", False):
        add("output.weight", w["lm_head.weight"])

    kvs = [
        gguf_kv("general.architecture", T_STRING, arch),
        gguf_kv("general.name", T_STRING, os.path.basename(os.path.normpath(hf_dir))),
        gguf_kv(arch + ".block_count", T_UINT32, n_layers),
        gguf_kv(arch + ".context_length", T_UINT32, cfg.get("max_position_embeddings", 2048)),
        gguf_kv(arch + ".embedding_length", T_UINT32, H),
        gguf_kv(arch + ".feed_forward_length", T_UINT32, cfg["intermediate_size"]),
        gguf_kv(arch + ".attention.head_count", T_UINT32, nh),
        gguf_kv(arch + ".attention.head_count_kv", T_UINT32, nkv),
        gguf_kv(arch + ".rope.freq_base", T_FLOAT32, float(cfg.get("rope_theta", 10000.0))),
        gguf_kv(arch + ".rope.dimension_count", T_UINT32, hd),
        gguf_kv(arch + ".attention.layer_norm_rms_epsilon", T_FLOAT32, float(cfg.get("rms_norm_eps", 1e-5))),
        gguf_kv(arch + ".vocab_size", T_UINT32, cfg["vocab_size"]),
    ]
    infos, blobs, offset = [], [], 0
    for name, a in tensors:
        ggml_type = GGML_F16 if a.dtype == np.float16 else GGML_F32
        ne = list(reversed(a.shape))  # ggml's ne[0] is the innermost (contiguous) dimension
        infos.append(gguf_string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne) +
                     struct.pack("<IQ", ggml_type, offset))
        data = a.tobytes()
        pad = (-len(data)) % ALIGNMENT
        blobs.append(data + b"\0" * pad)
        offset += len(data) + pad
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs) + b"".join(infos)
    head += b"\0" * ((-len(head)) % ALIGNMENT)
    with open(out_path, "wb") as f:
        f.write(head)
        for blob in blobs:
            f.write(blob)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("hf_dir")
    ap.add_argument("out")
    ap.add_argument("--outtype", choices=["f32", "f16"], default="f32")
    a = ap.parse_args(argv)
    convert(a.hf_dir, a.out, a.outtype)


if __name__ == "__main__":
    main()
