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
import json
import platform
import statistics
import time

import openai

TEXT = ("The history of the city begins with a small settlement on the river, where traders met to "
        "exchange grain, salt and cloth. ")


def one(client, model, prompt, n):
    t0 = time.time()
    first = None
    tokens = 0
    for chunk in client.completions.create(model=model, prompt=prompt, max_tokens=n, temperature=0, stream=True,
                                           extra_body={"ignore_eos": True}):
        if chunk.choices and chunk.choices[0].text and first is None:
            first = time.time() - t0
        if chunk.choices and chunk.choices[0].text:
            tokens += 1  # one streamed chunk per token (both servers stream token by token)
    return tokens, first if first is not None else time.time() - t0


def run(client, model, concurrency, n, reps, prompt_tokens):
    prompts = [TEXT * max(1, prompt_tokens // 24) + f" Chapter {i}." for i in range(concurrency * reps)]
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(lambda p: one(client, model, p, n), prompts))
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
    client = openai.OpenAI(base_url=a.url + "/v1", api_key="none", max_retries=0, timeout=3600)
    one(client, a.model, TEXT, 4)  # warm-up
    print(json.dumps({"cpu": platform.processor() or platform.machine(), "url": a.url, "model": a.model}))
    for c in (int(x) for x in a.concurrency.split(",")):
        print(json.dumps(run(client, a.model, c, a.n, a.r, a.p)), flush=True)


if __name__ == "__main__":
    main()
