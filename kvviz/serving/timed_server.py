"""A streaming server whose timings are known by construction: the truth a load generator is checked against.

Every streamed request is answered with its headers at once, its first token `ttft_s` after it arrived (when
its last bytes reached the machine, by the kernel's stamp: stamped.py), then one token every `itl_s`, as many
tokens as it asks (max_tokens; `tokens` when it does not), the last with a usage chunk and `data: [DONE]`. No
queueing, no batching: any number of requests run side by side, so what a client measures at any load should
be ttft_s, itl_s, and C × tokens / (ttft_s + (tokens - 1) × itl_s) tokens/s for C requests in flight in whole
waves (throughput()).

It holds its construction at hundreds of streams in flight on a small machine because it does little: it runs
in a process of its own (python -m kvviz.serving.timed_server; its CPU is not the client's), on one asyncio
event loop over raw protocols, with every chunk's bytes encoded once, each request's schedule anchored on the
kernel's stamp of its arrival (a request read late, in a burst, is still served on time), and each send
scheduled at an ABSOLUTE time (arrival + ttft_s + k × itl_s), so a late send does not delay the next. It
measures itself: every send's lateness (when it went out against when it was due) and every request's wait to
be read are kept, and GET /lateness reports them (and resets them with ?reset=1), so a run can show that the
server kept its schedule. OpenAI-compatible as far as kvviz's client and vLLM's benchmark client need: GET
/v1/models, /health, a minimal /metrics (requests running, tokens made), POST /v1/completions and
/v1/chat/completions streamed (stream_options.include_usage is always honoured). Knows HTTP/1.1 and the
OpenAI stream format; nothing of kvviz's client.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kvviz.serving.stamped import Listener, listener

MODEL = "timed"
COMPLETIONS, CHAT = "/v1/completions", "/v1/chat/completions"
START_TIMEOUT_S = 30.0
MAX_HEAD_BYTES = 64 * 1024


def throughput(concurrency: int, ttft_s: float, itl_s: float, tokens: int) -> float:
    """Output tokens/s of `concurrency` requests in flight, closed loop, in whole waves: each request of
    `tokens` tokens takes ttft_s + (tokens - 1) × itl_s from its arrival to its last token."""
    return concurrency * tokens / (ttft_s + (tokens - 1) * itl_s)


def _frame(data: bytes) -> bytes:
    """One server-sent event as one chunk of a chunked HTTP body."""
    event = b"data: " + data + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(event), event)


def _dumps(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Chunks:
    """The pre-encoded bytes of one model's and API's streams: the first token's (a chat stream opens with
    the role announcement in the same write, as vLLM sends it), every middle token's, the last token's."""

    first: bytes
    token: bytes
    last: bytes

    @classmethod
    def of(cls, model: str, chat: bool) -> Chunks:
        def chunk(finish: str | None, role: bool = False) -> bytes:
            if chat:
                delta = {"role": "assistant", "content": ""} if role else {"content": " tok"}
                choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                obj = "chat.completion.chunk"
            else:
                choice = {"index": 0, "text": " tok", "logprobs": None, "finish_reason": finish, "stop_reason": None}
                obj = "text_completion"
            return _frame(_dumps({"id": "timed-0", "object": obj, "created": 0, "model": model, "choices": [choice]}))

        return cls(first=(chunk(None, role=True) if chat else b"") + chunk(None), token=chunk(None),
                   last=chunk("length"))


def _usage_and_end(model: str, chat: bool, prompt_tokens: int, tokens: int) -> bytes:
    """The usage chunk, [DONE] and the end of the chunked body, sent with the last token."""
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": tokens, "total_tokens": prompt_tokens + tokens}
    obj = "chat.completion.chunk" if chat else "text_completion"
    return _frame(_dumps({"id": "timed-0", "object": obj, "created": 0, "model": model, "choices": [],
                          "usage": usage})) + _frame(b"[DONE]") + b"0\r\n\r\n"


def _response(status: int, body: bytes, kind: str = "application/json") -> bytes:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}.get(status, "Error")
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
            "Connection: keep-alive\r\n\r\n").encode() + body


STREAM_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
               b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n")


class _Clock:
    """The server's schedule and its own record of keeping it."""

    def __init__(self, ttft_s: float, itl_s: float, tokens: int, model: str) -> None:
        self.ttft_s, self.itl_s, self.tokens, self.model = ttft_s, itl_s, tokens, model
        self.chunks = {False: Chunks.of(model, False), True: Chunks.of(model, True)}
        self.lateness: list[float] = []
        self.waits: list[float] = []  # per request: how long its bytes waited to be read (kernel stamps)
        self.listener: Listener | None = None
        self.running = 0
        self.max_running = 0
        self.requests = 0
        self.generated = 0


class _Stream:
    """One request's stream: its k-th token goes out at arrival + ttft_s + k × itl_s."""

    __slots__ = ("arrived", "chat", "conn", "due", "handle", "k", "n", "tail")

    def __init__(self, conn: _Connection, chat: bool, n: int, arrived: float, tail: bytes) -> None:
        self.conn, self.chat, self.n, self.k, self.arrived, self.tail = conn, chat, n, 0, arrived, tail
        self.due = arrived + conn.clock.ttft_s
        self.handle = conn.loop.call_at(self.due, self.send)

    def send(self) -> None:
        conn, clock = self.conn, self.conn.clock
        clock.lateness.append(conn.loop.time() - self.due)
        chunks = clock.chunks[self.chat]
        last = self.k == self.n - 1
        data = (chunks.first if self.k == 0 else chunks.token) if not last else \
            (chunks.first[: -len(chunks.token)] if self.chat and self.k == 0 else b"") + chunks.last + self.tail
        conn.transport.write(data)
        clock.generated += 1
        self.k += 1
        if last:
            clock.running -= 1
            conn.finished()
            return
        self.due = self.arrived + clock.ttft_s + self.k * clock.itl_s  # absolute: lateness never accumulates
        self.handle = conn.loop.call_at(self.due, self.send)


class _Connection(asyncio.Protocol):
    """One client connection: requests read one after another (keep-alive), one stream at a time."""

    def __init__(self, clock: _Clock) -> None:
        self.clock = clock
        self.loop = asyncio.get_running_loop()
        self.buffer = b""
        self.stream: _Stream | None = None
        self.transport: asyncio.Transport | None = None
        self.sock = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # asyncio sets TCP_NODELAY on TCP sockets: each chunk goes out as written
        listening = self.clock.listener
        self.sock = listening.claim(transport.get_extra_info("socket").fileno()) if listening else None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.stream is not None:
            self.stream.handle.cancel()
            self.clock.running -= 1
            self.stream = None

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.stream is None:
            self.next_request(self.arrival())

    def arrival(self) -> float:
        """When the bytes just read reached the machine, on the loop's clock: the kernel's stamp where there is
        one (a request that waited to be read is still served on its own schedule), else now."""
        now = self.loop.time()
        if self.sock is None or not self.sock.stamped:
            return now
        return now - (time.perf_counter() - self.sock.arrived_at)

    def finished(self) -> None:
        self.stream = None
        if self.buffer:
            self.next_request(self.arrival())

    def next_request(self, now: float) -> None:
        """Answer the buffered request once it is whole (headers and Content-Length bytes of body)."""
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buffer) > MAX_HEAD_BYTES:
                self.transport.close()
            return
        lines = self.buffer[:end].decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        length = int(headers.get("content-length", "0") or 0)
        if len(self.buffer) < end + 4 + length:
            return
        body, self.buffer = self.buffer[end + 4: end + 4 + length], self.buffer[end + 4 + length:]
        method, _, rest = lines[0].partition(" ")
        path = rest.rpartition(" ")[0]
        self.answer(method, path, body, now)

    def answer(self, method: str, path: str, body: bytes, now: float) -> None:
        route, _, query = path.partition("?")
        if method == "POST" and route in (COMPLETIONS, CHAT):
            return self.start_stream(route == CHAT, body, now)
        if method != "GET":
            return self.reply(405, {"error": {"message": f"{method} {route} is not served"}})
        if route == "/v1/models":
            return self.reply(200, {"object": "list", "data": [{"id": self.clock.model, "object": "model",
                                                                 "owned_by": "kvviz"}]})
        if route == "/health":
            return self.reply(200, {})
        if route == "/metrics":
            return self.write_then_next(_response(200, self.metrics().encode(), "text/plain; version=0.0.4"))
        if route == "/lateness":
            return self.reply(200, self.report(reset="reset=1" in query))
        return self.reply(404, {"detail": "Not Found"})

    def reply(self, status: int, obj: dict) -> None:
        self.write_then_next(_response(status, _dumps(obj)))

    def write_then_next(self, data: bytes) -> None:
        self.transport.write(data)
        if self.buffer:
            self.next_request(self.loop.time())

    def start_stream(self, chat: bool, body: bytes, now: float) -> None:
        clock = self.clock
        try:
            asked = json.loads(body)
        except ValueError:
            return self.reply(400, {"error": {"message": "the body is not JSON"}})
        if asked.get("model") != clock.model:
            return self.reply(404, {"error": {"message": f"The model `{asked.get('model')}` does not exist."}})
        if not asked.get("stream"):
            return self.reply(400, {"error": {"message": "this server only streams (stream: true)"}})
        n = int(asked.get("max_tokens") or asked.get("max_completion_tokens") or clock.tokens)
        if n < 1:
            return self.reply(400, {"error": {"message": "max_tokens must be at least 1"}})
        text = asked.get("prompt") if not chat else " ".join(str(m.get("content", "")) for m in asked["messages"])
        prompt_tokens = len(str(text).split())  # a word a token: this server has no tokenizer
        self.transport.write(STREAM_HEAD)  # headers at once, as vLLM's front end sends them
        clock.waits.append(self.loop.time() - now)
        clock.requests += 1
        clock.running += 1
        clock.max_running = max(clock.max_running, clock.running)
        self.stream = _Stream(self, chat, n, now, _usage_and_end(clock.model, chat, prompt_tokens, n))

    def metrics(self) -> str:
        c = self.clock
        return ("# TYPE vllm:num_requests_running gauge\n"
                f'vllm:num_requests_running{{model_name="{c.model}"}} {c.running}\n'
                "# TYPE vllm:num_requests_waiting gauge\n"
                f'vllm:num_requests_waiting{{model_name="{c.model}"}} 0\n'
                "# TYPE vllm:generation_tokens counter\n"
                f'vllm:generation_tokens_total{{model_name="{c.model}"}} {c.generated}\n')

    def report(self, reset: bool) -> dict:
        c = self.clock
        late, wait = sorted(c.lateness), sorted(c.waits)
        out = {"sends": len(late), "requests": c.requests, "max_running": c.max_running,
               "p50_s": _quantile(late, 0.5), "p99_s": _quantile(late, 0.99), "max_s": late[-1] if late else None,
               "read_wait_p50_s": _quantile(wait, 0.5), "read_wait_p99_s": _quantile(wait, 0.99),
               "read_wait_max_s": wait[-1] if wait else None, "cpu_s": time.process_time()}
        if reset:
            c.lateness, c.waits, c.requests, c.max_running = [], [], 0, c.running
        return out


def _quantile(values: list[float], q: float) -> float | None:
    """The q-quantile of sorted values (nearest rank), None for none."""
    return values[min(len(values) - 1, int(q * len(values)))] if values else None


async def serve(port: int, ttft_s: float, itl_s: float, tokens: int, model: str = MODEL,
                host: str = "127.0.0.1", ready=None, tls: tuple[str, str] | None = None) -> None:
    """Serve until cancelled; `ready(port)` is called once the socket listens. tls: (certificate file, key
    file) to serve https."""
    clock = _Clock(ttft_s, itl_s, tokens, model)
    clock.listener = listener(host, port)
    loop = asyncio.get_running_loop()
    context = None
    if tls is not None:
        import ssl

        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(*tls)
    server = await loop.create_server(lambda: _Connection(clock), sock=clock.listener, ssl=context)
    if ready is not None:
        ready(server.sockets[0].getsockname()[1])
    async with server:
        await server.serve_forever()


@dataclass(frozen=True)
class Lateness:
    """How well the server kept its schedule since the last reset: its sends' lateness (counted, p50/p99/max in
    seconds), how long requests' bytes waited to be read (p50/p99/max; they are served on the schedule of
    their arrival all the same), the requests it streamed and the most at once, and its CPU time so far."""

    sends: int
    requests: int
    max_running: int
    p50_s: float | None
    p99_s: float | None
    max_s: float | None
    read_wait_p50_s: float | None
    read_wait_p99_s: float | None
    read_wait_max_s: float | None
    cpu_s: float


@dataclass(frozen=True)
class TimedServer:
    """A running timed server (see timed_server()): where it listens and what it was built to do."""

    base_url: str
    model: str
    ttft_s: float
    itl_s: float
    tokens: int

    def throughput(self, concurrency: int, tokens: int | None = None) -> float:
        return throughput(concurrency, self.ttft_s, self.itl_s, tokens or self.tokens)

    def lateness(self, reset: bool = False) -> Lateness:
        """The server's record of its sends (and, with reset, a fresh one from now)."""
        with urllib.request.urlopen(self.base_url + "/lateness" + ("?reset=1" if reset else ""),  # noqa: S310
                                    timeout=10) as resp:
            return Lateness(**json.loads(resp.read()))


@contextmanager
def timed_server(ttft_s: float = 0.3, itl_s: float = 0.025, tokens: int = 32, model: str = MODEL,
                 tls: tuple[str, str] | None = None) -> Iterator[TimedServer]:
    """A timed server in a process of its own on a free port of 127.0.0.1, for a with block; stopped after.
    tls: (certificate file, key file) to serve https."""
    package_root = str(Path(__file__).resolve().parents[2])
    env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
    https = ["--certfile", tls[0], "--keyfile", tls[1]] if tls else []
    proc = subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "kvviz.serving.timed_server", "--port", "0", "--ttft", repr(ttft_s), "--itl",
         repr(itl_s), "--tokens", str(tokens), "--model", model, *https], stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = _first_line(proc)
        if not line.startswith("listening "):
            raise RuntimeError(f"the timed server did not start: {line or 'no output'}")  # internal: a test server
        scheme = "https" if tls else "http"
        yield TimedServer(f"{scheme}://127.0.0.1:{int(line.split()[1])}", model, ttft_s, itl_s, tokens)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def _first_line(proc: subprocess.Popen) -> str:
    """The server's first line on stdout, waited for at most START_TIMEOUT_S."""
    import selectors

    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(START_TIMEOUT_S):
            return ""
    return proc.stdout.readline().strip()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m kvviz.serving.timed_server", description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 (0: a free one; default 8000)")
    p.add_argument("--ttft", type=float, default=0.3, help="seconds from a request's arrival to its first token")
    p.add_argument("--itl", type=float, default=0.025, help="seconds between tokens")
    p.add_argument("--tokens", type=int, default=32, help="tokens per request when it does not ask (max_tokens)")
    p.add_argument("--model", default=MODEL, help=f"the served model's name (default {MODEL})")
    p.add_argument("--certfile", help="serve https with this certificate (PEM; with --keyfile)")
    p.add_argument("--keyfile", help="the certificate's private key (PEM)")
    args = p.parse_args(argv)

    def ready(port: int) -> None:
        print(f"listening {port}", flush=True)

    try:
        asyncio.run(serve(args.port, args.ttft, args.itl, args.tokens, args.model, ready=ready,
                          tls=(args.certfile, args.keyfile) if args.certfile else None))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    main()
