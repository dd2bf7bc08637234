#!/usr/bin/env python3
"""`hybridgen serve` through the official `openai` client (PyPI), on loopback only.

Each group starts its own server on a free port of 127.0.0.1 and stops it at the end:

  api       completion, chat, streaming, token-id prompts, logprobs, stop strings; greedy
            replies equal `hybridgen generate`; prefix reuse; a per-request policy and K; every
            bad input (malformed JSON, wrong types, unknown model, a prompt past the context,
            negative and absurd max_tokens, an oversized body, a wrong or missing key); /health,
            /v1/models, /metrics
  queue     too many queued requests: 429 with Retry-After; the server unharmed
  load      CLIENTS clients x REQUESTS requests of mixed lengths, some disconnecting mid-stream:
            every finished reply equals the same request run alone, and the KV bytes return to 0
  shutdown  SIGTERM mid-stream: the stream finishes, new requests are refused, exit status 0;
            a second signal ends at once; a prefix a server kept with --state-cache is placed
            by the next server

Usage: test_serve.py --bin build/bin/hybridgen --model smollm2 GROUP [--clients N --requests N]
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import openai

MODEL_ID = "smollm2"
PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "List three colors:",
    "def fibonacci(n):",
    "The meaning of life is",
    "Water boils at",
]


class Server:
    """A `hybridgen serve` process on a free loopback port."""

    def __init__(self, args, extra=(), env=None):
        cmd = [args.bin, "serve", "-m", args.model, "--host", "127.0.0.1", "--port", "0", "--alias", MODEL_ID,
               "--no-progress", *extra]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
        self.log = []
        self.port = None
        deadline = time.time() + 300
        while self.port is None:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError("serve exited before listening:\n" + "".join(self.log))
            self.log.append(line)
            m = re.search(r"on http://127\.0\.0\.1:(\d+)/v1", line)
            if m:
                self.port = int(m.group(1))
            if time.time() > deadline:
                raise RuntimeError("serve did not start in 300 s")
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()
        self.url = f"http://127.0.0.1:{self.port}"

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def client(self, key="none", **kw):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0, timeout=600, **kw)

    def raw(self, method, path, body=None, headers=None):
        """One HTTP request without the client: (status, headers, parsed JSON or text)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        data = body if isinstance(body, (bytes, type(None))) else body.encode()
        conn.request(method, path, body=data, headers=headers or {"Content-Type": "application/json"})
        r = conn.getresponse()
        text = r.read().decode("utf-8", "replace")
        conn.close()
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = text
        return r.status, dict(r.getheaders()), parsed

    def metrics(self):
        status, _, text = self.raw("GET", "/metrics")
        assert status == 200, status
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        """On success the server must stop cleanly on SIGTERM; on a failure it is killed."""
        if kind is not None:
            self.kill()
            return False
        rc = self.stop()
        check(rc == 0, f"exit status {rc}")
        return False

    def kill(self):
        """After a failure: end the server and show what it said."""
        self.proc.kill()
        self.proc.wait()
        sys.stderr.write("".join(self.log[-40:]))

    def stop(self, sig=signal.SIGTERM, timeout=120):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def generate_reference(args, prompt, n, chat=False):
    """The same greedy run through `hybridgen generate`: its text."""
    cmd = [args.bin, "generate", "-m", args.model, "-p", prompt, "-n", str(n), "--temp", "0", "--no-progress"]
    if chat:
        cmd.append("--chat")
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=600).stdout
    return out[:-1] if out.endswith("\n") else out


def expect_error(fn, status, what):
    try:
        fn()
    except openai.APIStatusError as e:
        check(e.status_code == status, f"{what}: status {e.status_code}, expected {status}: {e}")
        body = e.response.json()
        check("error" in body and "message" in body["error"] and "type" in body["error"], f"{what}: {body}")
        return e
    raise AssertionError(f"{what}: no error")


def group_api(args):
    with Server(args, ["--policy", "full,hybrid:window=32:sinks=4", "--parallel", "2", "--ctx", "1024",
                       "--api-key", "sekrit", "--max-body", "0.1", "--prefix-cache", "64"]) as server:
        c = server.client("sekrit")
        check([m.id for m in c.models.list().data] == [MODEL_ID], "models")
        # Greedy replies equal hybridgen generate's, completion and chat, whole and streamed.
        ref = generate_reference(args, PROMPTS[0], 12)
        r = c.completions.create(model=MODEL_ID, prompt=PROMPTS[0], max_tokens=12, temperature=0)
        check(r.choices[0].text == ref, f"completion {r.choices[0].text!r} != generate {ref!r}")
        check(r.usage.completion_tokens == 12 and r.choices[0].finish_reason == "length", f"usage {r.usage}")
        chat_ref = generate_reference(args, "Name a fruit.", 10, chat=True)
        r = c.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": "Name a fruit."}],
                                      max_tokens=10, temperature=0)
        check(r.choices[0].message.content == chat_ref, f"chat {r.choices[0].message.content!r} != {chat_ref!r}")
        text = "".join(ch.choices[0].text for ch in c.completions.create(
            model=MODEL_ID, prompt=PROMPTS[0], max_tokens=12, temperature=0, stream=True))
        check(text == ref, f"streamed completion {text!r} != {ref!r}")
        chunks = list(c.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": "Name a fruit."}],
                                                max_tokens=10, temperature=0, stream=True,
                                                stream_options={"include_usage": True}))
        text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
        check(text == chat_ref, f"streamed chat {text!r} != {chat_ref!r}")
        check(chunks[-1].usage is not None and chunks[-1].usage.completion_tokens >= 1, "stream usage")
        # Token ids in, the same tokens out; logprobs; a stop string.
        ids = json.loads(subprocess.run([args.bin, "tokenize", "-m", args.model, "-p", PROMPTS[0], "--ids"],
                                        capture_output=True, text=True, check=True).stdout)
        r = c.completions.create(model=MODEL_ID, prompt=ids, max_tokens=12, temperature=0, logprobs=3)
        check(r.choices[0].text == ref, "token-id prompt")
        lp = r.choices[0].logprobs
        check(len(lp.token_logprobs) == 12 and all(len(t) == 3 for t in lp.top_logprobs), "logprobs")
        check(all(v <= 0 for v in lp.token_logprobs), "logprobs are log-probabilities")
        cut = ref[: max(1, len(ref) // 2)].rstrip()[-3:]
        r = c.completions.create(model=MODEL_ID, prompt=PROMPTS[0], max_tokens=12, temperature=0, stop=[cut])
        check(r.choices[0].finish_reason == "stop" and cut not in r.choices[0].text and ref.startswith(r.choices[0].text),
              f"stop {cut!r}: {r.choices[0].text!r}")
        # Prefix reuse: a prompt that extends a prompt already run places its prefix from the cache.
        long_prompt = " ".join(PROMPTS) * 4
        first = c.completions.create(model=MODEL_ID, prompt=long_prompt, max_tokens=6, temperature=0)
        again = c.completions.create(model=MODEL_ID, prompt=long_prompt + " And then", max_tokens=6, temperature=0)
        check(again.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens - 1,
              f"prefix reuse: cached {again.usage.prompt_tokens_details} of {first.usage.prompt_tokens}")
        # Per-request policy and K.
        r = c.completions.create(model=MODEL_ID, prompt=long_prompt, max_tokens=6, temperature=0,
                                 extra_body={"hybridgen": {"policy": "hybrid:window=32:sinks=4", "k": 8}})
        check(r.usage.completion_tokens == 6, "hybrid policy per request")
        expect_error(lambda: c.completions.create(model=MODEL_ID, prompt="x", max_tokens=2,
                                                  extra_body={"hybridgen": {"policy": "h2o"}}), 400, "policy not served")
        expect_error(lambda: c.completions.create(model=MODEL_ID, prompt="x", max_tokens=2,
                                                  extra_body={"hybridgen": {"k": 8}}), 400, "k on a full policy")
        hang_ups(server, c)
        bad_inputs(server, c)
        health = server.raw("GET", "/health")
        check(health[0] == 200 and health[2]["status"] == "ok", "health")
        m = server.metrics()
        check(m['hybridgen_requests_total{status="200"}'] >= 9 and m['hybridgen_requests_total{status="400"}'] >= 5, "metrics")
        check(m["hybridgen_completion_tokens_total"] > 0 and m["hybridgen_time_to_first_token_seconds_count"] > 0, "metrics")
        check(m['hybridgen_kv_bytes{memory="device"}'] == 0 and m['hybridgen_kv_bytes{memory="host"}'] == 0, "kv freed")


def hang_ups(server, c):
    """A client that goes away, streaming or not, cancels its request: its sequence is freed at
    once, long before the 900 tokens it asked for."""
    def wait_freed(what):
        deadline = time.time() + 5
        while True:
            m = server.metrics()
            kv = m['hybridgen_kv_bytes{memory="device"}'] + m['hybridgen_kv_bytes{memory="host"}']
            if m["hybridgen_running_sequences"] == 0 and kv == 0:
                return m["hybridgen_completion_tokens_total"]
            check(time.time() < deadline, f"{what}: the request still runs 5 s after its client left")
            time.sleep(0.05)

    before = wait_freed("before")
    stream = c.completions.create(model=MODEL_ID, prompt=PROMPTS[1], max_tokens=900, temperature=0, stream=True,
                                  extra_body={"ignore_eos": True})
    next(iter(stream))
    stream.close()
    after_stream = wait_freed("a stream")
    try:
        c.with_options(timeout=1.0).completions.create(model=MODEL_ID, prompt=PROMPTS[1], max_tokens=900,
                                                       temperature=0, extra_body={"ignore_eos": True})
        raise AssertionError("a 900-token reply came within 1 s")
    except openai.APITimeoutError:
        pass
    after_whole = wait_freed("a whole reply")
    check(after_stream - before < 900 and after_whole - after_stream < 900, "the requests were cut short")


def bad_inputs(server, c):
    auth = {"Content-Type": "application/json", "Authorization": "Bearer sekrit"}
    for body, what in [("{not json", "malformed JSON"), ("[1, 2]", "not an object"),
                       ('{"model": "smollm2", "prompt": 5}', "prompt of a wrong type"),
                       ('{"model": "smollm2", "prompt": "hi", "max_tokens": "ten"}', "max_tokens a string"),
                       ('{"model": "smollm2", "prompt": "hi", "temperature": 9}', "temperature out of range"),
                       ('{"model": "smollm2", "prompt": [999999999]}', "token id past the vocabulary"),
                       ('{"model": "smollm2", "messages": []}', "no messages")]:
        path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
        status, _, reply = server.raw("POST", path, body, auth)
        check(status == 400 and "error" in reply, f"{what}: {status} {reply}")
    expect_error(lambda: c.completions.create(model="gpt-4", prompt="hi"), 404, "unknown model")
    expect_error(lambda: c.completions.create(model=MODEL_ID, prompt="word " * 2000), 400, "prompt past the context")
    expect_error(lambda: c.completions.create(model=MODEL_ID, prompt="hi", max_tokens=-1), 400, "negative max_tokens")
    expect_error(lambda: c.completions.create(model=MODEL_ID, prompt="hi", max_tokens=10**12), 400, "absurd max_tokens")
    expect_error(lambda: c.completions.create(model=MODEL_ID, prompt="hi", n=2), 400, "n = 2")
    status, _, reply = server.raw("POST", "/v1/completions", json.dumps({"model": MODEL_ID, "prompt": "x" * 200000}), auth)
    check(status == 413 and "error" in reply, f"oversized body: {status}")
    expect_error(lambda: server.client("wrong").completions.create(model=MODEL_ID, prompt="hi"), 401, "wrong key")
    status, _, reply = server.raw("POST", "/v1/completions", json.dumps({"model": MODEL_ID, "prompt": "hi"}))
    check(status == 401 and reply["error"]["code"] == "invalid_api_key", f"missing key: {status}")
    # Bytes that are not UTF-8 are read as U+FFFD, as the tokenizer's lossy decoding does.
    status, _, reply = server.raw("POST", "/v1/completions", b'{"model": "smollm2", "prompt": "caf\xe9", "max_tokens": 2}', auth)
    check(status == 200 and reply["usage"]["completion_tokens"] >= 1, f"invalid UTF-8: {status} {reply}")
    status, _, _ = server.raw("GET", "/v1/nothing", None, auth)
    check(status == 404, "unknown endpoint")


def group_queue(args):
    with Server(args, ["--parallel", "1", "--max-queue", "1", "--ctx", "512"]) as server:
        c = server.client()
        def until(running, queued):  # the server's gauges, polled
            deadline = time.time() + 60
            while True:
                m = server.metrics()
                if m["hybridgen_running_sequences"] == running and m["hybridgen_queue_depth"] == queued:
                    return
                check(time.time() < deadline, f"expected {running} running and {queued} queued: {m}")
                time.sleep(0.01)

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            # One request takes the slot, then one waits in the queue (sent one after the other: the
            # second must not arrive while the first still waits to be admitted).
            running = []
            for p, state in zip(PROMPTS[:2], [(1, 0), (1, 1)]):
                running.append(pool.submit(c.completions.create, model=MODEL_ID, prompt=p, max_tokens=160,
                                           temperature=0, extra_body={"ignore_eos": True}))
                until(*state)
            e = expect_error(lambda: c.completions.create(model=MODEL_ID, prompt="hi", max_tokens=2), 429, "queue full")
            check(e.response.headers.get("retry-after") == "1", "Retry-After")
            for f in running:
                check(f.result().usage.completion_tokens >= 1, "the queued requests finish")
        r = c.completions.create(model=MODEL_ID, prompt="hi", max_tokens=2)
        check(r.usage.completion_tokens >= 1, "the server is unharmed")


def group_load(args):
    with Server(args, ["--parallel", str(args.parallel), "--ctx", "1024", "--max-queue", "1024",
                       "--prefill-chunk", "32"]) as server:
        c = server.client()
        lengths = [4, 9, 16]
        jobs = [(PROMPTS[(i * 7 + j) % len(PROMPTS)] * (1 + (i + j) % 3), lengths[(i + j) % 3], (i * 5 + j) % 6 == 0)
                for i in range(args.clients) for j in range(args.requests)]
        # What each request gives alone (the server's greedy reply with nothing beside it).
        alone = {}
        for prompt, n, _ in jobs:
            if (prompt, n) not in alone:
                alone[(prompt, n)] = c.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=n,
                                                          temperature=0).choices[0].text

        def client(i):
            done = 0
            for j in range(args.requests):
                prompt, n, disconnect = jobs[i * args.requests + j]
                if disconnect:  # read one chunk, then hang up mid-stream
                    stream = c.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=64, temperature=0,
                                                  stream=True, extra_body={"ignore_eos": True})
                    next(iter(stream))
                    stream.close()
                    continue
                if j % 2:
                    text = "".join(ch.choices[0].text for ch in c.completions.create(
                        model=MODEL_ID, prompt=prompt, max_tokens=n, temperature=0, stream=True))
                else:
                    text = c.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=n, temperature=0).choices[0].text
                check(text == alone[(prompt, n)], f"client {i} request {j}: {text!r} != alone {alone[(prompt, n)]!r}")
                done += 1
            return done

        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(args.clients) as pool:
            finished = sum(pool.map(client, range(args.clients)))
        print(f"load: {finished} replies checked, {len(jobs) - finished} disconnected, {time.time() - t0:.1f} s")
        deadline = time.time() + 60
        while True:
            m = server.metrics()
            idle = m["hybridgen_running_sequences"] == 0 and m["hybridgen_queue_depth"] == 0
            kv = m['hybridgen_kv_bytes{memory="device"}'] + m['hybridgen_kv_bytes{memory="host"}']
            if idle and kv == 0:
                break
            check(time.time() < deadline, f"the KV bytes did not return to 0: {m}")
            time.sleep(0.2)


def state_cache(args):
    """--state-cache DIR: a prefix another server prefilled is found on disk by the next one."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        long_prompt = " ".join(PROMPTS) * 3
        runs = []
        for _ in range(2):
            with Server(args, ["--parallel", "1", "--ctx", "512", "--state-cache", d, "--prefix-cache", "0"]) as server:
                r = server.client().completions.create(model=MODEL_ID, prompt=long_prompt + f" Part {len(runs)}.",
                                                       max_tokens=4, temperature=0)
                runs.append(r.usage)
        check(runs[0].prompt_tokens_details.cached_tokens == 0, f"first server: {runs[0]}")
        check(runs[1].prompt_tokens_details.cached_tokens >= runs[0].prompt_tokens - 8,
              f"the second server did not place the first one's prefix from disk: {runs[1]}")


def group_shutdown(args):
    server = Server(args, ["--parallel", "2", "--ctx", "512", "--grace", "60"])
    c = server.client()
    stream = c.completions.create(model=MODEL_ID, prompt=PROMPTS[1], max_tokens=40, temperature=0, stream=True,
                                  extra_body={"ignore_eos": True})
    it = iter(stream)
    text = next(it).choices[0].text
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    try:
        status, _, reply = server.raw("POST", "/v1/completions", json.dumps({"model": MODEL_ID, "prompt": "hi"}))
        refused = status == 503 and "error" in reply
    except OSError:
        refused = True  # the listening socket is closed
    check(refused, "a new request after SIGTERM was answered")
    check(server.raw("GET", "/health")[0] == 503, "health while shutting down")
    chunks = [ch for ch in it]
    text += "".join(ch.choices[0].text for ch in chunks)
    check(chunks and chunks[-1].choices[0].finish_reason == "length", "the stream in flight finished")
    rc = server.proc.wait(timeout=120)
    check(rc == 0, f"exit status after SIGTERM {rc}")
    # A second signal ends at once, even with a stream running.
    server = Server(args, ["--parallel", "1", "--ctx", "512", "--grace", "600"])
    stream = server.client().completions.create(model=MODEL_ID, prompt=PROMPTS[1], max_tokens=160, temperature=0,
                                                stream=True, extra_body={"ignore_eos": True})
    next(iter(stream))
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    server.proc.send_signal(signal.SIGTERM)
    rc = server.proc.wait(timeout=30)
    check(rc == 128 + signal.SIGTERM, f"exit status after a second SIGTERM {rc}")
    state_cache(args)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("group", choices=["api", "queue", "load", "shutdown"])
    p.add_argument("--bin", required=True)
    p.add_argument("--model", default="smollm2")
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--requests", type=int, default=20)
    p.add_argument("--parallel", type=int, default=8)
    args = p.parse_args()
    {"api": group_api, "queue": group_queue, "load": group_load, "shutdown": group_shutdown}[args.group](args)
    print(f"serve {args.group}: ok")


if __name__ == "__main__":
    sys.exit(main())
