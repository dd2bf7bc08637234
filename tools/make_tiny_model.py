#!/usr/bin/env python3
"""Write tiny, seeded, random Hugging Face checkpoints (config.json + safetensors).

Used by the end-to-end tests together with tools/reference.py (an independent
numpy forward pass).  Only numpy is needed; the safetensors files are written by
hand.

Usage:
  make_tiny_model.py OUT_DIR --arch opt|llama|qwen2 [--variant NAME] [--seed N]
                     [--dtype f32|bf16|f16] [--shards N]
  make_tiny_model.py --all OUT_ROOT [--seed N] [--dtype ...] [--shards N]
  make_tiny_model.py --list

With --all every variant in VARIANTS is written to OUT_ROOT/<variant>/.
--dtype / --shards given on the command line override a variant's own default
(some variants, e.g. llama-gqa-bf16 or qwen2-sharded, carry their own).
"""
import argparse
import json
import os
import sys

import numpy as np

# --------------------------------------------------------------------------
# Variants.  Each entry: arch, config overrides, and optional dtype / shards
# defaults.  Sizes are tiny; every variant has vocab_size >= 256, so token ids
# 0..255 are valid for all of them, and max_position_embeddings >= 1024.
# --------------------------------------------------------------------------
VARIANTS = {
    # Llama, MHA, untied lm_head, plain RoPE.
    "llama-mha": dict(arch="llama", cfg=dict(
        hidden_size=64, num_attention_heads=4, num_key_value_heads=4,
        intermediate_size=128, num_hidden_layers=2, vocab_size=256,
        tie_word_embeddings=False, rope_theta=10000.0, rms_norm_eps=1e-5)),
    # Llama, GQA (2 kv heads for 4 query heads), tied embeddings, odd vocab.
    "llama-gqa": dict(arch="llama", cfg=dict(
        hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, num_hidden_layers=3, vocab_size=300,
        tie_word_embeddings=True, rope_theta=10000.0, rms_norm_eps=1e-5)),
    # Llama 3.x style rope scaling.
    "llama3-rope": dict(arch="llama", cfg=dict(
        hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, num_hidden_layers=2, vocab_size=256,
        max_position_embeddings=1024, tie_word_embeddings=False,
        rope_theta=500000.0, rms_norm_eps=1e-5,
        rope_scaling={"rope_type": "llama3", "factor": 8.0,
                      "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 64})),
    # Qwen2: q/k/v biases, GQA, theta 1e6, tied embeddings.
    "qwen2": dict(arch="qwen2", cfg=dict(
        hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=160, num_hidden_layers=2, vocab_size=384,
        tie_word_embeddings=True, rope_theta=1000000.0, rms_norm_eps=1e-6)),
    "qwen2-untied": dict(arch="qwen2", cfg=dict(
        hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=160, num_hidden_layers=3, vocab_size=320,
        tie_word_embeddings=False, rope_theta=1000000.0, rms_norm_eps=1e-6)),
    # OPT: pre-LN, ReLU, biases, tied lm_head, learned positions (offset 2).
    "opt": dict(arch="opt", cfg=dict(
        hidden_size=64, num_attention_heads=4, ffn_dim=256,
        num_hidden_layers=2, vocab_size=272, word_embed_proj_dim=64,
        do_layer_norm_before=True)),
    # OPT with word_embed_proj_dim != hidden_size (project_in / project_out).
    "opt-proj": dict(arch="opt", cfg=dict(
        hidden_size=64, num_attention_heads=4, ffn_dim=256,
        num_hidden_layers=2, vocab_size=272, word_embed_proj_dim=32,
        do_layer_norm_before=True)),
    # OPT post-LN (like OPT-350m), no final_layer_norm, no projection.
    "opt-postln": dict(arch="opt", cfg=dict(
        hidden_size=64, num_attention_heads=4, ffn_dim=256,
        num_hidden_layers=2, vocab_size=272, word_embed_proj_dim=64,
        do_layer_norm_before=False)),
    # OPT-350m-like: post-LN AND projection.
    "opt-postln-proj": dict(arch="opt", cfg=dict(
        hidden_size=64, num_attention_heads=4, ffn_dim=256,
        num_hidden_layers=2, vocab_size=272, word_embed_proj_dim=32,
        do_layer_norm_before=False)),
    # Storage-format variants (same shapes as above, different files).
    "llama-gqa-bf16": dict(arch="llama", base="llama-gqa", dtype="bf16"),
    "qwen2-f16": dict(arch="qwen2", base="qwen2", dtype="f16"),
    "llama-mha-sharded": dict(arch="llama", base="llama-mha", shards=2),
    "opt-sharded": dict(arch="opt", base="opt", shards=2),
}

DEFAULT_VARIANT = {"llama": "llama-mha", "qwen2": "qwen2", "opt": "opt"}

TORCH_DTYPE = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}
ST_DTYPE = {"f32": "F32", "bf16": "BF16", "f16": "F16"}


# --------------------------------------------------------------------------
# safetensors writing
# --------------------------------------------------------------------------
def f32_to_bf16_bits(a):
    """float32 array -> uint16 bf16 bit patterns, round to nearest even."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounding = 0x7FFF + ((u >> 16) & 1)
    out = ((u + rounding) >> 16).astype(np.uint16)
    nan = np.isnan(a)
    if nan.any():
        out[nan] = 0x7FC0
    return out


def encode(a, dtype):
    a = np.asarray(a, dtype=np.float32)
    if dtype == "f32":
        return a.astype("<f4").tobytes()
    if dtype == "f16":
        return a.astype("<f2").tobytes()
    if dtype == "bf16":
        return f32_to_bf16_bits(a).astype("<u2").tobytes()
    raise ValueError(dtype)


def write_safetensors(path, tensors, dtype):
    """tensors: list of (name, float32 array)."""
    header = {"__metadata__": {"format": "pt"}}
    blobs = []
    off = 0
    for name, arr in tensors:
        b = encode(arr, dtype)
        header[name] = {"dtype": ST_DTYPE[dtype], "shape": list(arr.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(np.uint64(len(h)).astype("<u8").tobytes())
        f.write(h)
        for b in blobs:
            f.write(b)
    return off


def write_checkpoint(out_dir, tensors, dtype, shards):
    os.makedirs(out_dir, exist_ok=True)
    for fn in os.listdir(out_dir):  # remove stale files from an earlier run
        if fn.endswith(".safetensors") or fn == "model.safetensors.index.json":
            os.remove(os.path.join(out_dir, fn))
    if shards <= 1:
        write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors, dtype)
        return
    itemsize = 4 if dtype == "f32" else 2
    sizes = [a.size * itemsize for _, a in tensors]
    total = sum(sizes)
    # split in order into `shards` groups of roughly equal bytes
    groups = [[] for _ in range(shards)]
    acc = 0
    for (name, a), s in zip(tensors, sizes):
        g = min(shards - 1, int(acc * shards // total))
        groups[g].append((name, a))
        acc += s
    groups = [g for g in groups if g]
    n = len(groups)
    weight_map = {}
    for i, g in enumerate(groups):
        fn = "model-%05d-of-%05d.safetensors" % (i + 1, n)
        write_safetensors(os.path.join(out_dir, fn), g, dtype)
        for name, _ in g:
            weight_map[name] = fn
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map},
                  f, indent=2)


# --------------------------------------------------------------------------
# configs and weights
# --------------------------------------------------------------------------
def llama_like_config(arch, c, dtype):
    H = c["hidden_size"]
    nh = c["num_attention_heads"]
    cfg = {
        "architectures": ["LlamaForCausalLM" if arch == "llama" else "Qwen2ForCausalLM"],
        "model_type": arch,
        "vocab_size": c["vocab_size"],
        "hidden_size": H,
        "intermediate_size": c["intermediate_size"],
        "num_hidden_layers": c["num_hidden_layers"],
        "num_attention_heads": nh,
        "num_key_value_heads": c["num_key_value_heads"],
        "hidden_act": "silu",
        "max_position_embeddings": c.get("max_position_embeddings", 1024),
        "initializer_range": 0.02,
        "rms_norm_eps": c["rms_norm_eps"],
        "use_cache": True,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "tie_word_embeddings": c["tie_word_embeddings"],
        "rope_theta": c["rope_theta"],
        "rope_scaling": c.get("rope_scaling"),
        "attention_dropout": 0.0,
        "torch_dtype": TORCH_DTYPE[dtype],
        "transformers_version": "4.45.0",
    }
    if arch == "llama":
        cfg.update({"attention_bias": False, "mlp_bias": False,
                    "pretraining_tp": 1, "head_dim": H // nh})
    else:
        cfg.update({"use_sliding_window": False, "sliding_window": 4096,
                    "max_window_layers": c["num_hidden_layers"]})
    return cfg


def opt_config(c, dtype):
    return {
        "architectures": ["OPTForCausalLM"],
        "model_type": "opt",
        "vocab_size": c["vocab_size"],
        "hidden_size": c["hidden_size"],
        "num_hidden_layers": c["num_hidden_layers"],
        "ffn_dim": c["ffn_dim"],
        "num_attention_heads": c["num_attention_heads"],
        "max_position_embeddings": c.get("max_position_embeddings", 1024),
        "word_embed_proj_dim": c["word_embed_proj_dim"],
        "do_layer_norm_before": c["do_layer_norm_before"],
        "_remove_final_layer_norm": False,
        "activation_function": "relu",
        "enable_bias": True,
        "layer_norm_elementwise_affine": True,
        "dropout": 0.0,
        "attention_dropout": 0.0,
        "activation_dropout": 0.0,
        "layerdrop": 0.0,
        "init_std": 0.02,
        "use_cache": True,
        "pad_token_id": 1,
        "bos_token_id": 2,
        "eos_token_id": 2,
        "prefix": "</s>",
        "tie_word_embeddings": True,
        "torch_dtype": TORCH_DTYPE[dtype],
        "transformers_version": "4.45.0",
    }


class Gen:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def w(self, *shape, std=0.2):
        return (self.rng.standard_normal(shape) * std).astype(np.float32)

    def norm(self, n):
        return (1.0 + 0.1 * self.rng.standard_normal(n)).astype(np.float32)

    def bias(self, n):
        return (0.1 * self.rng.standard_normal(n)).astype(np.float32)


def llama_like_weights(arch, cfg, g):
    H = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    nkv = cfg["num_key_value_heads"]
    hd = H // nh
    F = cfg["intermediate_size"]
    V = cfg["vocab_size"]
    t = [("model.embed_tokens.weight", g.w(V, H))]
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        t.append((p + "input_layernorm.weight", g.norm(H)))
        t.append((p + "self_attn.q_proj.weight", g.w(nh * hd, H)))
        t.append((p + "self_attn.k_proj.weight", g.w(nkv * hd, H)))
        t.append((p + "self_attn.v_proj.weight", g.w(nkv * hd, H)))
        if arch == "qwen2":
            t.append((p + "self_attn.q_proj.bias", g.bias(nh * hd)))
            t.append((p + "self_attn.k_proj.bias", g.bias(nkv * hd)))
            t.append((p + "self_attn.v_proj.bias", g.bias(nkv * hd)))
        t.append((p + "self_attn.o_proj.weight", g.w(H, nh * hd)))
        t.append((p + "post_attention_layernorm.weight", g.norm(H)))
        t.append((p + "mlp.gate_proj.weight", g.w(F, H)))
        t.append((p + "mlp.up_proj.weight", g.w(F, H)))
        t.append((p + "mlp.down_proj.weight", g.w(H, F)))
    t.append(("model.norm.weight", g.norm(H)))
    if not cfg["tie_word_embeddings"]:
        t.append(("lm_head.weight", g.w(V, H)))
    return t


def opt_weights(cfg, g):
    H = cfg["hidden_size"]
    P = cfg["word_embed_proj_dim"]
    F = cfg["ffn_dim"]
    V = cfg["vocab_size"]
    pre = "model.decoder."
    t = [(pre + "embed_tokens.weight", g.w(V, P)),
         (pre + "embed_positions.weight", g.w(cfg["max_position_embeddings"] + 2, H))]
    if P != H:
        t.append((pre + "project_in.weight", g.w(H, P)))
        t.append((pre + "project_out.weight", g.w(P, H)))
    for i in range(cfg["num_hidden_layers"]):
        p = pre + "layers.%d." % i
        for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
            t.append((p + "self_attn.%s.weight" % n, g.w(H, H)))
            t.append((p + "self_attn.%s.bias" % n, g.bias(H)))
        t.append((p + "self_attn_layer_norm.weight", g.norm(H)))
        t.append((p + "self_attn_layer_norm.bias", g.bias(H)))
        t.append((p + "fc1.weight", g.w(F, H)))
        t.append((p + "fc1.bias", g.bias(F)))
        t.append((p + "fc2.weight", g.w(H, F)))
        t.append((p + "fc2.bias", g.bias(H)))
        t.append((p + "final_layer_norm.weight", g.norm(H)))
        t.append((p + "final_layer_norm.bias", g.bias(H)))
    # HF OPTDecoder only has final_layer_norm when do_layer_norm_before
    # (and not _remove_final_layer_norm).
    if cfg["do_layer_norm_before"] and not cfg.get("_remove_final_layer_norm", False):
        t.append((pre + "final_layer_norm.weight", g.norm(H)))
        t.append((pre + "final_layer_norm.bias", g.bias(H)))
    return t


def resolve(variant):
    v = VARIANTS[variant]
    if "base" in v:
        b = resolve(v["base"])
        out = dict(b)
        out.update({k: val for k, val in v.items() if k != "base"})
        return out
    return dict(v)


def make(out_dir, variant, seed=0, dtype=None, shards=None):
    v = resolve(variant)
    arch = v["arch"]
    dtype = dtype or v.get("dtype", "f32")
    shards = shards or v.get("shards", 1)
    c = v["cfg"]
    # The seed is mixed with the base variant's config only, so e.g.
    # llama-gqa-bf16 holds exactly llama-gqa's weights rounded to bf16.
    g = Gen(seed)
    if arch == "opt":
        cfg = opt_config(c, dtype)
        tensors = opt_weights(cfg, g)
    else:
        cfg = llama_like_config(arch, c, dtype)
        tensors = llama_like_weights(arch, cfg, g)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    write_checkpoint(out_dir, tensors, dtype, shards)
    return cfg


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir", nargs="?")
    ap.add_argument("--arch", choices=["opt", "llama", "qwen2"])
    ap.add_argument("--variant", choices=sorted(VARIANTS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", choices=["f32", "bf16", "f16"])
    ap.add_argument("--shards", type=int)
    ap.add_argument("--all", metavar="OUT_ROOT")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args(argv)
    if a.list:
        for name in VARIANTS:
            v = resolve(name)
            print(name, v["arch"], v.get("dtype", "f32"), v.get("shards", 1),
                  json.dumps(v["cfg"]))
        return 0
    if a.all:
        for name in VARIANTS:
            make(os.path.join(a.all, name), name, a.seed, a.dtype, a.shards)
        return 0
    if not a.out_dir:
        ap.error("OUT_DIR (or --all OUT_ROOT) required")
    variant = a.variant
    if variant is None:
        if a.arch is None:
            ap.error("--arch or --variant required")
        variant = DEFAULT_VARIANT[a.arch]
    if a.arch is not None and resolve(variant)["arch"] != a.arch:
        ap.error("variant %s is not of arch %s" % (variant, a.arch))
    make(a.out_dir, variant, a.seed, a.dtype, a.shards)
    return 0


if __name__ == "__main__":
    sys.exit(main())
