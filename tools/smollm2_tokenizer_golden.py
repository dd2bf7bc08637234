#!/usr/bin/env python3
"""Golden token ids for SmolLM2's tokenizer, from an implementation that is not ours.

Writes data/golden/tokenizer/smollm2.jsonl in the format of the other goldens there: one JSON
object a line, {"src", "text", "ids"}, ids encoded without adding BOS/EOS (SmolLM2 adds none) and
with the special tokens written in the text (<|im_start|>, ...) matched whole, as the engine does.
tests/unit/test_tokenizer_golden.cpp checks the engine's GGUF tokenizer against it.

The oracle is Hugging Face `tokenizers` (the Rust library under transformers' fast tokenizers),
pinned below, holding SmolLM2's vocabulary and merges as the GGUF stores them (read with the
`gguf` package) in SmolLM2's own tokenizer.json pipeline: no normalizer; pre-tokenizer
Digits(individual_digits) then ByteLevel (GPT-2's regex, no prefix space); BPE; ByteLevel
decoder; the 17 tokens the GGUF marks as control (<|endoftext|>, <|im_start|>, <|im_end|>, ...)
as special added tokens. transformers' own GGUF tokenizer loader is not used: 5.23.0 needs torch
to read a GGUF, and has no pre-tokenizer for tokenizer.ggml.pre = "smollm", so it would split
digits with GPT-2's regex instead of one by one.

--cross-check also encodes every row with llama.cpp's tokenizer (llama-cpp-python, vocab only),
which reads the same GGUF and its "smollm" pre-tokenizer, and fails on any difference.

Regenerate (a virtual environment outside the repository; nothing here is needed to run the tests):
  python3 -m venv /tmp/tokref
  /tmp/tokref/bin/pip install tokenizers==0.23.3 gguf==0.19.0
  /tmp/tokref/bin/python tools/smollm2_tokenizer_golden.py
  # optional cross-check (builds llama.cpp from the sdist, minutes):
  #   CMAKE_ARGS="-DLLAMA_CURL=OFF -DLLAVA_BUILD=OFF" /tmp/tokref/bin/pip install llama-cpp-python==0.3.36
  #   /tmp/tokref/bin/python tools/smollm2_tokenizer_golden.py --cross-check
"""
import argparse
import json
import os
import re
import sys

TOKENIZERS_VERSION = "0.23.3"
GGUF_VERSION = "0.19.0"
LLAMA_CPP_VERSION = "0.3.36"

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_GGUF = os.path.join(os.environ.get("HG_CACHE", os.path.expanduser("~/.cache/hybridgen")),
                            "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
DEFAULT_OUT = os.path.join(ROOT, "data", "golden", "tokenizer", "smollm2.jsonl")

# The prompt `hybridgen generate` sends for "What is 2+2?" (SmolLM2's template adds its default
# system prompt), and the same with a system prompt of its own.
CHAT_DEFAULT = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n")
CHAT_SYSTEM = ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nName 3 whales: 1) blue, 2) fin, "
               "3) sperm.<|im_end|>\n<|im_start|>assistant\nBlue, fin and sperm.<|im_end|>\n<|endoftext|>")

# What SmolLM2's pipeline does apart from GPT-2's and Qwen's (digits one by one, its special
# tokens), and code, whitespace and scripts the other goldens' edge rows do not reach.
EXTRA = {
    "digits": [
        " 123", "x1y2z3", "v2.0.1-rc3", "$1,234.56 and -0.5e-10", "2026-11-29T12:00:00Z",
        "０１２ fullwidth, ٣٤٥ Arabic-Indic, ४२ Devanagari digits", "½ ² Ⅻ ① numerics that are not decimal digits",
        "call 555-0100 ext. 42", "0x1F 0b1010 1e9 100%",
    ],
    "special": [
        CHAT_DEFAULT, CHAT_SYSTEM, "a<|im_end|>b", "<|im_start|><|im_start|>", "<|im_start|", "< |im_start|>",
        "<|IM_START|>", " <|endoftext|> ", "<jupyter_code>print(1)<jupyter_output>1<empty_output>",
        "<repo_name>hybridgen<file_sep><filename>main.cpp<gh_stars>10", "<issue_start>bug<issue_comment>fixed<issue_closed>",
        "<reponame><jupyter_start><jupyter_text><jupyter_script>",
    ],
    "code": [
        "#include <vector>\nint main() {\n\tstd::vector<int> v{1, 2, 3};\n\treturn v[0] == 1 ? 0 : 1;\n}\n",
        "for i in range(10):\n    if i % 2 == 0:\n        print(f\"{i:03d}\")  # even\n",
        "{\"name\": \"smollm2\", \"ids\": [1, 2, 3], \"ok\": true, \"x\": null}",
        "cmake -S . -B build -G Ninja && ctest --test-dir build -L fuzz -j 2 2>&1 | tail -n 20",
        "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
        "    \n\t\n  \t  indented\r\n",
    ],
    "whitespace": [
        "   ", "\t\t\t", "\n\n\n\n", "a\u3000b", "x \n y", "end with newlines\n\n", "a  b   c    d", " \u00a0 \u2009 ",
    ],
    "unicode": [
        "안녕하세요 세계", "नमस्ते दुनिया", "สวัสดีชาวโลก", "Γειά σου Κόσμε", "שלום עולם",
        "🇺🇸🇯🇵 flags, ❤️ heart, 👍🏿 tone", "e\u0301 vs é, A\u030a vs Å", "中文、日本語とカタカナ，한국어。",
        "\u200bzero\u200cwidth\u200djoiners\ufeff", "Ω≈ç√∫˜µ≤≥÷ …–—‘’“”",
    ],
}


def excerpt(path, start=None, chars=None):
    """The text of data/PATH, from the first occurrence of START on, cut after the last sentence
    that ends within CHARS characters."""
    with open(os.path.join(ROOT, "data", path), encoding="utf-8") as f:
        text = f.read()
    if start is not None:
        at = text.find(start)
        if at < 0:
            sys.exit(f"smollm2_tokenizer_golden: {path} does not contain {start!r}")
        text = text[at:]
    if chars is not None and len(text) > chars:
        ends = [m.end() for m in re.finditer(r"[.!?][\"”]?(?=\s)", text[:chars])]
        text = text[:ends[-1]] if ends else text[:chars]
    return text


# Real text from data/text: prose, a word list in five scripts with runs of spaces, dialogue,
# figures with thousands separators and cents, a census table, modern speech.
REAL = [
    ("moby-dick/chapter_1", lambda: excerpt("text/moby-dick/chapter_1.txt", chars=2000)),
    ("moby-dick/etymology", lambda: excerpt("text/moby-dick/etymology.txt")),
    ("moby-dick/chapter_122", lambda: excerpt("text/moby-dick/chapter_122.txt")),
    ("sotu/1863_abraham_lincoln_r", lambda: excerpt("text/sotu/1863_abraham_lincoln_r.txt",
                                                    "The receipts during the year", 900)),
    ("sotu/1862_abraham_lincoln_r", lambda: excerpt("text/sotu/1862_abraham_lincoln_r.txt", "1790 - 3,929,827", 500)),
    ("sotu/2016_barack_obama_d", lambda: excerpt("text/sotu/2016_barack_obama_d.txt", chars=1200)),
]


def rows():
    """(src, text) in the order they are written: the other goldens' edge rows first."""
    out = []
    with open(os.path.join(ROOT, "data", "golden", "tokenizer", "gpt2.jsonl"), encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r["src"] == "edge":
                out.append(("edge", r["text"]))
    for src, texts in EXTRA.items():
        out += [(src, t) for t in texts]
    out += [(src, make()) for src, make in REAL]
    return out


def require(module, version):
    if module.__version__ != version:
        sys.exit(f"smollm2_tokenizer_golden: needs {module.__name__}=={version}, found {module.__version__} "
                 "(the goldens name the version that made them)")


def hf_tokenizer(gguf_path):
    import gguf
    import tokenizers
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    require(tokenizers, TOKENIZERS_VERSION)
    from importlib.metadata import version
    if version("gguf") != GGUF_VERSION:
        sys.exit(f"smollm2_tokenizer_golden: needs gguf=={GGUF_VERSION}, found {version('gguf')}")

    reader = gguf.GGUFReader(gguf_path)
    field = lambda key: reader.fields[key].contents()  # noqa: E731
    if field("tokenizer.ggml.model") != "gpt2" or field("tokenizer.ggml.pre") != "smollm":
        sys.exit(f"smollm2_tokenizer_golden: {gguf_path} is not SmolLM2's byte-level BPE (tokenizer.ggml.pre smollm)")
    tokens, types, merges = field("tokenizer.ggml.tokens"), field("tokenizer.ggml.token_type"), field("tokenizer.ggml.merges")
    pairs = [tuple(m.split(" ")) for m in merges]
    assert all(len(p) == 2 for p in pairs), "a merge that is not two pieces"
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=pairs))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    control = [t for t, kind in zip(tokens, types) if kind == 3]  # llama.cpp's LLAMA_TOKEN_TYPE_CONTROL
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
    assert tok.get_vocab_size() == len(tokens) == 49152, tok.get_vocab_size()
    return tok


def llama_cpp_encoder(gguf_path):
    import llama_cpp
    require(llama_cpp, LLAMA_CPP_VERSION)
    llm = llama_cpp.Llama(model_path=gguf_path, vocab_only=True, verbose=False)
    return lambda text: llm.tokenize(text.encode("utf-8"), add_bos=False, special=True) if text else []


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", default=DEFAULT_GGUF, help="SmolLM2's GGUF (tools/fetch_model.sh)")
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--cross-check", action="store_true", help="also encode with llama-cpp-python; fail on a difference")
    args = ap.parse_args()
    if not os.path.exists(args.gguf):
        sys.exit(f"smollm2_tokenizer_golden: {args.gguf} not found (run tools/fetch_model.sh)")

    tok = hf_tokenizer(args.gguf)
    other = llama_cpp_encoder(args.gguf) if args.cross_check else None
    lines, differ = [], 0
    for src, text in rows():
        ids = tok.encode(text, add_special_tokens=False).ids
        back = tok.decode(ids, skip_special_tokens=False)
        if back != text:
            sys.exit(f"smollm2_tokenizer_golden: the oracle does not round-trip {text[:60]!r}: {back[:60]!r}")
        if other is not None and other(text) != ids:
            differ += 1
            print(f"llama.cpp differs on {src} {text[:60]!r}:\n  tokenizers {ids}\n  llama.cpp  {other(text)}")
        lines.append(json.dumps({"src": src, "text": text, "ids": ids}, ensure_ascii=False))
    if differ:
        sys.exit(f"smollm2_tokenizer_golden: llama.cpp differs on {differ} of {len(lines)} rows; nothing written")
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    checked = " (llama.cpp agrees on every row)" if other else ""
    print(f"wrote {len(lines)} rows to {os.path.relpath(args.out)}{checked}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
