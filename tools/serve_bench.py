#!/usr/bin/env python3
"""A load generator for OpenAI-compatible servers (hybridgen serve, llama-server): aggregate decode
tokens/s and median time to first token at each concurrency, the same load for every server.

Each of C concurrent clients streams R completions of N tokens (ignore_eos, greedy) from a prompt of
about P tokens; tokens/s counts completion tokens over the wall time from the first request to the
last token; TTFT is from sending a request to its first streamed token.

Usage: serve_bench.py --url http://127.0.0.1:8080 --model ID [--concurrency 1,4,8] [-n 64] [-r 2]
"""
import argparse
import concurrent.futures
import http.client
import json
import platform
import statistics
import time
import urllib.parse

TEXT = ("The history of the city begins with a small settlement on the river, where traders met to "
        "exchange grain, salt and cloth. ")


def one(url, model, prompt, n):
    """One streamed completion over a plain HTTP connection (the client's own CPU cost kept small:
    the load generator shares the machine with the server): (tokens, seconds to the first)."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=3600)
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": n, "temperature": 0, "stream": True,
                       "ignore_eos": True})
    t0 = time.time()
    conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        raise RuntimeError(f"{url}: HTTP {r.status}: {r.read()[:200]!r}")
    first = None
    tokens = 0
    for line in r:  # one event per token (both servers stream token by token)
        if not line.startswith(b"data: {"):
            continue
        choices = json.loads(line[6:]).get("choices") or [{}]
        if choices[0].get("text"):
            tokens += 1
            if first is None:
                first = time.time() - t0
    conn.close()
    return tokens, first if first is not None else time.time() - t0


def run(url, model, concurrency, n, reps, prompt_tokens):
    prompts = [TEXT * max(1, prompt_tokens // 24) + f" Chapter {i}." for i in range(concurrency * reps)]
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(lambda p: one(url, model, p, n), prompts))
    wall = time.time() - t0
    tokens = sum(r[0] for r in results)
    return {"concurrency": concurrency, "requests": len(prompts), "tokens": tokens, "seconds": round(wall, 2),
            "tokens_per_s": round(tokens / wall, 2), "ttft_median_s": round(statistics.median(r[1] for r in results), 3)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--concurrency", default="1,4,8")
    p.add_argument("-n", type=int, default=64, help="tokens per completion")
    p.add_argument("-r", type=int, default=2, help="completions per client")
    p.add_argument("-p", type=int, default=128, help="prompt tokens, about")
    a = p.parse_args()
    one(a.url, a.model, TEXT, 4)  # warm-up
    print(json.dumps({"cpu": platform.processor() or platform.machine(), "url": a.url, "model": a.model}))
    for c in (int(x) for x in a.concurrency.split(",")):
        print(json.dumps(run(a.url, a.model, c, a.n, a.r, a.p)), flush=True)


if __name__ == "__main__":
    main()
