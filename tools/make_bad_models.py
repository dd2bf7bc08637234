#!/usr/bin/env python3
"""Write broken copies of a model, one per kind of bad input the loaders must reject.

  make_bad_models.py HF_DIR OUT_ROOT [--gguf FILE.gguf]

HF_DIR is a tiny safetensors checkpoint (tools/make_tiny_model.py). Each OUT_ROOT/<case>/ is a
copy with one defect; with --gguf, OUT_ROOT/<case>.gguf files are broken copies of a GGUF file.
Prints the case names, one per line.
"""
import argparse
import json
import os
import shutil
import struct
import sys


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    return header, data[8 + n:]


def write_safetensors(path, header, payload):
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + payload)


def hf_cases(src, out):
    names = []

    def case(name, edit):
        d = os.path.join(out, name)
        shutil.copytree(src, d)
        edit(d)
        names.append(name)

    st = lambda d: os.path.join(d, "model.safetensors")

    def truncate(d):
        size = os.path.getsize(st(d))
        with open(st(d), "r+b") as f:
            f.truncate(size // 2)

    def header_beyond(d):
        with open(st(d), "r+b") as f:
            f.write(struct.pack("<Q", 1 << 40))

    def edit_header(fn):
        def go(d):
            header, payload = read_safetensors(st(d))
            fn(header)
            write_safetensors(st(d), header, payload)
        return go

    def tensors(h):
        return [k for k in h if k != "__metadata__"]

    def outside(h):
        k = tensors(h)[0]
        b, e = h[k]["data_offsets"]
        h[k]["data_offsets"] = [b + (1 << 30), e + (1 << 30)]

    def overlap(h):
        ks = sorted(tensors(h), key=lambda k: h[k]["data_offsets"][0])
        a, b = ks[0], ks[1]
        size_b = h[b]["data_offsets"][1] - h[b]["data_offsets"][0]
        start = h[a]["data_offsets"][0]
        h[b]["data_offsets"] = [start, start + size_b]

    def bad_dtype(h):
        h[tensors(h)[0]]["dtype"] = "C64"

    def bad_shape(h):
        k = next(k for k in tensors(h) if k.endswith("q_proj.weight"))
        r, c = h[k]["shape"]
        h[k]["shape"] = [c, r] if r != c else [r // 2, c * 2]

    def edit_config(fn):
        def go(d):
            p = os.path.join(d, "config.json")
            with open(p) as f:
                cfg = json.load(f)
            fn(cfg)
            with open(p, "w") as f:
                json.dump(cfg, f)
        return go

    case("truncated", truncate)
    case("header_beyond_file", header_beyond)
    case("offsets_outside_data", edit_header(outside))
    case("overlapping_tensors", edit_header(overlap))
    case("unsupported_dtype", edit_header(bad_dtype))
    case("wrong_shape", edit_header(bad_shape))
    case("unknown_arch", edit_config(lambda c: c.update(model_type="gpt9")))
    case("missing_field", edit_config(lambda c: c.pop("hidden_size")))
    return names


def gguf_tensor_type_offset(path):
    """Byte offset of the first tensor info's ggml type field."""
    with open(path, "rb") as f:
        data = f.read(64 << 20)
    pos = 4 + 4
    n_tensors, n_kv = struct.unpack_from("<QQ", data, pos)
    pos += 16
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip_value(t, pos):
        if t == 8:
            (n,) = struct.unpack_from("<Q", data, pos)
            return pos + 8 + n
        if t == 9:
            at, n = struct.unpack_from("<IQ", data, pos)
            pos += 12
            if at in sizes:
                return pos + n * sizes[at]
            for _ in range(n):
                pos = skip_value(at, pos)
            return pos
        return pos + sizes[t]

    for _ in range(n_kv):
        (n,) = struct.unpack_from("<Q", data, pos)
        pos += 8 + n
        (t,) = struct.unpack_from("<I", data, pos)
        pos = skip_value(t, pos + 4)
    (n,) = struct.unpack_from("<Q", data, pos)
    pos += 8 + n
    (nd,) = struct.unpack_from("<I", data, pos)
    pos += 4 + 8 * nd
    return pos


def gguf_cases(src, out):
    names = []
    with open(src, "rb") as f:
        head = f.read(1 << 20)
    p = os.path.join(out, "gguf_truncated.gguf")
    with open(p, "wb") as f:
        f.write(head)
    names.append("gguf_truncated.gguf")
    p = os.path.join(out, "gguf_unknown_tensor_type.gguf")
    shutil.copyfile(src, p)
    with open(p, "r+b") as f:
        f.seek(gguf_tensor_type_offset(src))
        f.write(struct.pack("<I", 99))
    names.append("gguf_unknown_tensor_type.gguf")
    return names


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hf_dir")
    ap.add_argument("out_root")
    ap.add_argument("--gguf")
    a = ap.parse_args()
    os.makedirs(a.out_root, exist_ok=True)
    names = hf_cases(a.hf_dir, a.out_root)
    if a.gguf:
        names += gguf_cases(a.gguf, a.out_root)
    print("\n".join(names))


if __name__ == "__main__":
    sys.exit(main())
