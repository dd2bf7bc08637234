#!/usr/bin/env python3
"""The gguf package's (gguf-py, llama.cpp's own) quantizers and dequantizers, as an independent
oracle for hybridgen's block formats (tests/unit/test_quant_types.cpp).

  gguf_quants.py dequantize TYPE IN.bin OUT.f32   blocks of TYPE -> float32 values
  gguf_quants.py quantize TYPE IN.f32 OUT.bin     float32 values -> blocks of TYPE
  gguf_quants.py types                            the types the installed package can quantize

TYPE is a ggml type name (q5_0, q4_k, iq4_xs, ...). Files are raw little-endian bytes.
"""
import sys

import numpy as np
from gguf import GGMLQuantizationType, quants


def qtype(name):
    try:
        return GGMLQuantizationType[name.upper()]
    except KeyError:
        sys.exit(f"gguf_quants: unknown ggml type {name!r}")


def main(argv):
    if len(argv) == 2 and argv[1] == "types":
        x = np.zeros((1, 256), dtype=np.float32)
        for t in GGMLQuantizationType:
            try:
                quants.quantize(x, t)
                print(t.name.lower())
            except Exception:  # noqa: BLE001 - the package raises NotImplementedError or others
                pass
        return 0
    if len(argv) != 5 or argv[1] not in ("dequantize", "quantize"):
        sys.exit(__doc__)
    cmd, t, src, dst = argv[1], qtype(argv[2]), argv[3], argv[4]
    if cmd == "dequantize":
        blocks = np.fromfile(src, dtype=np.uint8)
        with np.errstate(all="ignore"):  # NaN / Inf scales are part of the test
            out = quants.dequantize(blocks, t)
        out.astype("<f4").tofile(dst)
    else:
        x = np.fromfile(src, dtype="<f4")
        block = quants.GGML_QUANT_SIZES[t][0]
        with np.errstate(all="ignore"):
            out = quants.quantize(x.reshape(-1, block), t)
        out.astype(np.uint8).tofile(dst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
