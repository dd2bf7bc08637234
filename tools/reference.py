#!/usr/bin/env python3
"""Independent numpy reference forward pass for HF checkpoints (opt, llama, qwen2)
and GGUF files (llama, qwen2; weights dequantized by the gguf package).

Follows the Hugging Face transformers modeling code (modeling_opt.py,
modeling_llama.py, modeling_qwen2.py) for a single un-padded sequence.
Computes in float64 (or float32 with --compute f32) and writes float32 logits
of shape [T, vocab_size] with np.save.

Usage:
  reference.py MODEL_DIR|FILE.gguf (--ids "[1,2,3]" | --ids-file F) --out logits.npy
               [--dtype-kv f32|f16|bf16] [--compute f64|f32]

--ids-file: a JSON list of ints (or {"ids": [...]}), or whitespace/comma
separated ints.  --dtype-kv rounds the cached K (after RoPE) and V to that
dtype, emulating a reduced-precision KV cache (f32: no change to f32 compute).
"""
import argparse
import json
import math
import os
import re
import sys

import numpy as np

# --------------------------------------------------------------------------
# safetensors loading (header parsed by hand)
# --------------------------------------------------------------------------
_NP = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "BF16": "<u2",
       "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1", "U8": "u1"}


def bf16_bits_to_f32(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


def load_safetensors(path):
    out = {}
    with open(path, "rb") as f:
        data = f.read()
    n = int(np.frombuffer(data[:8], dtype="<u8")[0])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    base = 8 + n
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = info["dtype"]
        b, e = info["data_offsets"]
        shape = tuple(info["shape"])
        arr = np.frombuffer(data, dtype=_NP[dt], count=(e - b) // np.dtype(_NP[dt]).itemsize,
                            offset=base + b).reshape(shape)
        if dt == "BF16":
            arr = bf16_bits_to_f32(arr)
        out[name] = arr
    return out


def load_weights(model_dir):
    idx = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            wm = json.load(f)["weight_map"]
        files = sorted(set(wm.values()))
    elif os.path.exists(os.path.join(model_dir, "model.safetensors")):
        files = ["model.safetensors"]
    else:
        files = sorted(fn for fn in os.listdir(model_dir) if fn.endswith(".safetensors"))
        if not files:
            raise FileNotFoundError("no safetensors in %s" % model_dir)
    w = {}
    for fn in files:
        w.update(load_safetensors(os.path.join(model_dir, fn)))
    return w


# --------------------------------------------------------------------------
# GGUF loading: the config from the metadata, the tensors under their HF names,
# dequantized by the gguf package (llama.cpp's gguf-py), not by hybridgen
# --------------------------------------------------------------------------
_GGUF_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_GGUF_LAYER_NAMES = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def _gguf_value(reader, key, default=None):
    field = reader.fields.get(key)
    if field is None:
        return default
    v = field.parts[field.data[0]]
    if field.types and field.types[0].name == "STRING":
        return bytes(v).decode("utf-8")
    return v.tolist()[0] if hasattr(v, "tolist") else v


def _unpermute(w, n_head):
    """Undoes llama.cpp's convert_hf_to_gguf permute of llama Q/K rows (HF rotate_half order)."""
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def load_gguf(path):
    from gguf import GGUFReader, quants  # pip install gguf (scripts/setup.sh)
    r = GGUFReader(path)
    arch = _gguf_value(r, "general.architecture")
    if arch not in ("llama", "qwen2"):
        raise NotImplementedError("GGUF architecture %r" % arch)
    g = lambda k, d=None: _gguf_value(r, "%s.%s" % (arch, k), d)  # noqa: E731
    nh = int(g("attention.head_count"))
    nkv = int(g("attention.head_count_kv", nh))
    w = {}
    for t in r.tensors:
        if t.name == "rope_freqs.weight":
            raise NotImplementedError("rope_freqs.weight (llama3 rope scaling) in a GGUF")
        a = quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        shape = tuple(int(n) for n in reversed(t.shape.tolist()))
        a = a.reshape(shape)
        name = _GGUF_NAMES.get(t.name)
        if name is None:
            blk, i, kind, what = t.name.split(".")
            name = "model.layers.%s.%s.%s" % (i, _GGUF_LAYER_NAMES[kind], what)
            if arch == "llama" and kind in ("attn_q", "attn_k"):
                a = _unpermute(a, nh if kind == "attn_q" else nkv)
        w[name] = a
    cfg = {
        "model_type": arch,
        "hidden_size": int(g("embedding_length")),
        "num_hidden_layers": int(g("block_count")),
        "num_attention_heads": nh,
        "num_key_value_heads": nkv,
        "rms_norm_eps": float(g("attention.layer_norm_rms_epsilon", 1e-6)),
        "rope_theta": float(g("rope.freq_base", 10000.0)),
        "vocab_size": int(w["model.embed_tokens.weight"].shape[0]),
        "tie_word_embeddings": "lm_head.weight" not in w,
        "hidden_act": "silu",
    }
    key_len = g("attention.key_length")
    if key_len is not None:
        cfg["head_dim"] = int(key_len)
    return cfg, w


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------
def round_to(x, dtype):
    if dtype in (None, "f32", "f64"):
        return x if dtype != "f32" else x.astype(np.float32).astype(x.dtype)
    if dtype == "f16":
        return x.astype(np.float16).astype(x.dtype)
    if dtype == "bf16":
        u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
        u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint32) << 16
        return u.astype(np.uint32).view(np.float32).astype(x.dtype)
    raise ValueError(dtype)


def linear(x, w, b=None):
    y = x @ w.T
    if b is not None:
        y = y + b
    return y


def softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y


def rms_norm(x, w, eps):
    var = (x * x).mean(-1, keepdims=True)
    return w * (x / np.sqrt(var + eps))


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu(x):  # exact (erf) gelu
    from math import erf
    v = np.vectorize(erf)
    return 0.5 * x * (1.0 + v(x / math.sqrt(2.0)))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


ACT = {"relu": lambda x: np.maximum(x, 0), "silu": silu, "swish": silu,
       "gelu": gelu, "gelu_new": gelu_tanh, "gelu_pytorch_tanh": gelu_tanh}


def causal_attention(q, k, v, scale):
    """q: [nh, T, hd]; k, v: [nh, T, hd] (already repeated). Returns [T, nh*hd]."""
    nh, T, hd = q.shape
    s = np.einsum("htd,hsd->hts", q, k) * scale
    mask = np.triu(np.ones((T, T), dtype=bool), k=1)
    s = np.where(mask[None], -np.inf, s)
    p = softmax(s, -1)
    o = np.einsum("hts,hsd->htd", p, v)
    return o.transpose(1, 0, 2).reshape(T, nh * hd)


# --------------------------------------------------------------------------
# RoPE (HF modeling_rope_utils semantics)
# --------------------------------------------------------------------------
def rope_inv_freq(cfg, head_dim):
    """Returns (inv_freq [head_dim//2] float64, attention_scaling)."""
    base = float(cfg.get("rope_theta", 10000.0))
    partial = float(cfg.get("partial_rotary_factor", 1.0))
    dim = int(head_dim * partial)
    # HF computes in float32: 1 / base ** (arange(0, dim, 2).float() / dim)
    expo = (np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / np.float32(dim))
    inv_freq = (1.0 / (np.float32(base) ** expo.astype(np.float64))).astype(np.float32)
    inv_freq = inv_freq.astype(np.float64)
    rs = cfg.get("rope_scaling") or {}
    rtype = rs.get("rope_type", rs.get("type", "default")) if rs else "default"
    if rtype == "default":
        return inv_freq, 1.0
    if rtype == "linear":
        return inv_freq / float(rs["factor"]), 1.0
    if rtype == "llama3":
        factor = float(rs["factor"])
        low = float(rs["low_freq_factor"])
        high = float(rs["high_freq_factor"])
        old = float(rs["original_max_position_embeddings"])
        low_freq_wavelen = old / low
        high_freq_wavelen = old / high
        wavelen = 2 * math.pi / inv_freq
        inv_l = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * inv_l / factor + smooth * inv_l
        is_medium = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
        inv_l = np.where(is_medium, smoothed, inv_l)
        return inv_l, 1.0
    raise NotImplementedError("rope_scaling type %r" % rtype)


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def apply_rope(x, cos, sin):
    """x: [nh, T, hd]; cos/sin: [T, hd]."""
    return x * cos[None] + rotate_half(x) * sin[None]


# --------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------
def get(w, name, dt):
    return w[name].astype(dt) if name in w else None


def forward_llama(cfg, w, ids, dt, kv_dtype):
    H = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads") or nh
    hd = cfg.get("head_dim") or H // nh
    eps = cfg.get("rms_norm_eps", 1e-6)
    act = ACT[cfg.get("hidden_act", "silu")]
    if cfg.get("use_sliding_window", False):
        print("warning: sliding window attention not emulated", file=sys.stderr)
    T = len(ids)
    x = w["model.embed_tokens.weight"][ids].astype(dt)

    inv_freq, att_scale = rope_inv_freq(cfg, hd)
    pos = np.arange(T, dtype=np.float64)
    freqs = pos[:, None] * inv_freq[None, :]
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos = (np.cos(emb) * att_scale).astype(dt)
    sin = (np.sin(emb) * att_scale).astype(dt)
    rot = emb.shape[-1]

    n_rep = nh // nkv
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        h = rms_norm(x, get(w, p + "input_layernorm.weight", dt), eps)
        q = linear(h, get(w, p + "self_attn.q_proj.weight", dt), get(w, p + "self_attn.q_proj.bias", dt))
        k = linear(h, get(w, p + "self_attn.k_proj.weight", dt), get(w, p + "self_attn.k_proj.bias", dt))
        v = linear(h, get(w, p + "self_attn.v_proj.weight", dt), get(w, p + "self_attn.v_proj.bias", dt))
        q = q.reshape(T, nh, hd).transpose(1, 0, 2)
        k = k.reshape(T, nkv, hd).transpose(1, 0, 2)
        v = v.reshape(T, nkv, hd).transpose(1, 0, 2)
        if rot == hd:
            q = apply_rope(q, cos, sin)
            k = apply_rope(k, cos, sin)
        else:  # partial rotary
            q = np.concatenate([apply_rope(q[..., :rot], cos, sin), q[..., rot:]], -1)
            k = np.concatenate([apply_rope(k[..., :rot], cos, sin), k[..., rot:]], -1)
        k = round_to(k, kv_dtype)
        v = round_to(v, kv_dtype)
        # repeat_kv: kv head j serves query heads j*n_rep .. j*n_rep+n_rep-1
        k = np.repeat(k, n_rep, axis=0)
        v = np.repeat(v, n_rep, axis=0)
        o = causal_attention(q, k, v, hd ** -0.5)
        o = linear(o, get(w, p + "self_attn.o_proj.weight", dt), get(w, p + "self_attn.o_proj.bias", dt))
        x = x + o
        h = rms_norm(x, get(w, p + "post_attention_layernorm.weight", dt), eps)
        g = linear(h, get(w, p + "mlp.gate_proj.weight", dt), get(w, p + "mlp.gate_proj.bias", dt))
        u = linear(h, get(w, p + "mlp.up_proj.weight", dt), get(w, p + "mlp.up_proj.bias", dt))
        d = linear(act(g) * u, get(w, p + "mlp.down_proj.weight", dt), get(w, p + "mlp.down_proj.bias", dt))
        x = x + d
    x = rms_norm(x, get(w, "model.norm.weight", dt), eps)
    if "lm_head.weight" in w:
        head = get(w, "lm_head.weight", dt)
    else:
        if not cfg.get("tie_word_embeddings", True):
            raise KeyError("lm_head.weight missing and tie_word_embeddings is false")
        head = get(w, "model.embed_tokens.weight", dt)
    return x @ head.T


def forward_opt(cfg, w, ids, dt, kv_dtype):
    H = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    hd = H // nh
    pre_ln = cfg.get("do_layer_norm_before", True)
    act = ACT[cfg.get("activation_function", "relu")]
    T = len(ids)
    pfx = "model.decoder."
    if pfx + "embed_tokens.weight" not in w and "decoder.embed_tokens.weight" in w:
        pfx = "decoder."
    E = get(w, pfx + "embed_tokens.weight", dt)
    x = E[ids]
    if pfx + "project_in.weight" in w:
        x = linear(x, get(w, pfx + "project_in.weight", dt))
    # OPTLearnedPositionalEmbedding: positions = cumsum(mask)*mask - 1 + offset(2)
    positions = np.arange(T) + 2
    x = x + get(w, pfx + "embed_positions.weight", dt)[positions]
    scaling = hd ** -0.5
    for i in range(cfg["num_hidden_layers"]):
        p = pfx + "layers.%d." % i
        res = x
        if pre_ln:
            x = layer_norm(x, get(w, p + "self_attn_layer_norm.weight", dt), get(w, p + "self_attn_layer_norm.bias", dt))
        q = linear(x, get(w, p + "self_attn.q_proj.weight", dt), get(w, p + "self_attn.q_proj.bias", dt)) * scaling
        k = linear(x, get(w, p + "self_attn.k_proj.weight", dt), get(w, p + "self_attn.k_proj.bias", dt))
        v = linear(x, get(w, p + "self_attn.v_proj.weight", dt), get(w, p + "self_attn.v_proj.bias", dt))
        q = q.reshape(T, nh, hd).transpose(1, 0, 2)
        k = round_to(k.reshape(T, nh, hd).transpose(1, 0, 2), kv_dtype)
        v = round_to(v.reshape(T, nh, hd).transpose(1, 0, 2), kv_dtype)
        o = causal_attention(q, k, v, 1.0)
        o = linear(o, get(w, p + "self_attn.out_proj.weight", dt), get(w, p + "self_attn.out_proj.bias", dt))
        x = res + o
        if not pre_ln:
            x = layer_norm(x, get(w, p + "self_attn_layer_norm.weight", dt), get(w, p + "self_attn_layer_norm.bias", dt))
        res = x
        if pre_ln:
            x = layer_norm(x, get(w, p + "final_layer_norm.weight", dt), get(w, p + "final_layer_norm.bias", dt))
        x = linear(x, get(w, p + "fc1.weight", dt), get(w, p + "fc1.bias", dt))
        x = act(x)
        x = linear(x, get(w, p + "fc2.weight", dt), get(w, p + "fc2.bias", dt))
        x = res + x
        if not pre_ln:
            x = layer_norm(x, get(w, p + "final_layer_norm.weight", dt), get(w, p + "final_layer_norm.bias", dt))
    if pre_ln and not cfg.get("_remove_final_layer_norm", False):
        x = layer_norm(x, get(w, pfx + "final_layer_norm.weight", dt), get(w, pfx + "final_layer_norm.bias", dt))
    if pfx + "project_out.weight" in w:
        x = linear(x, get(w, pfx + "project_out.weight", dt))
    head = get(w, "lm_head.weight", dt) if "lm_head.weight" in w else E
    return x @ head.T


def forward(model_dir, ids, compute="f64", kv_dtype="f32", weights=None, cfg=None):
    if cfg is None and str(model_dir).endswith(".gguf"):
        cfg, weights = load_gguf(model_dir)
    if cfg is None:
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = json.load(f)
    w = weights if weights is not None else load_weights(model_dir)
    dt = np.float64 if compute == "f64" else np.float32
    ids = np.asarray(ids, dtype=np.int64)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError("ids must be a non-empty 1-D list")
    V = cfg["vocab_size"]
    if ids.min() < 0 or ids.max() >= V:
        raise ValueError("token id out of range [0, %d)" % V)
    mt = cfg.get("model_type")
    if mt in ("llama", "qwen2", "mistral"):
        logits = forward_llama(cfg, w, ids, dt, kv_dtype)
    elif mt == "opt":
        logits = forward_opt(cfg, w, ids, dt, kv_dtype)
    else:
        raise NotImplementedError("model_type %r" % mt)
    return logits.astype(np.float32)


def parse_ids(text):
    text = text.strip()
    try:
        v = json.loads(text)
        if isinstance(v, dict):
            v = v.get("ids", v.get("input_ids"))
        if v and isinstance(v[0], list):
            if len(v) != 1:
                raise ValueError("batches not supported")
            v = v[0]
        return [int(t) for t in v]
    except json.JSONDecodeError:
        return [int(t) for t in re.split(r"[\s,\[\]]+", text) if t]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--ids")
    g.add_argument("--ids-file", action="append",
                   help="repeatable, one sequence each, with one --out each (the model loads once)")
    ap.add_argument("--out", required=True, action="append")
    ap.add_argument("--dtype-kv", default="f32", choices=["f32", "f16", "bf16"])
    ap.add_argument("--compute", default="f64", choices=["f64", "f32"])
    a = ap.parse_args(argv)
    if a.ids is not None:
        sequences = [parse_ids(a.ids)]
    else:
        sequences = []
        for fn in a.ids_file:
            with open(fn) as f:
                sequences.append(parse_ids(f.read()))
    if len(sequences) != len(a.out):
        ap.error("one --out per sequence")
    cfg, weights = load_gguf(a.model_dir) if a.model_dir.endswith(".gguf") else (None, None)
    for ids, out in zip(sequences, a.out):
        np.save(out, forward(a.model_dir, ids, a.compute, a.dtype_kv, weights=weights, cfg=cfg))
    return 0


if __name__ == "__main__":
    sys.exit(main())
