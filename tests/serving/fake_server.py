"""A small OpenAI-compatible streaming server on 127.0.0.1 for the serving tests: a real HTTP server (the
standard library's, one thread per connection) that streams known chunks at known times, so what a client
measures can be worked out by hand, and that misbehaves on request (no stream, malformed SSE, a key, an
error chunk, a /metrics that is not Prometheus text)."""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "fake"
METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="fake"} 3.0
vllm:num_requests_running{engine="1",model_name="fake"} 1.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="fake"} 2.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="fake"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="fake"} 0.75
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{engine="0",model_name="fake"} 1234.0
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_bucket{engine="0",le="+Inf",model_name="fake"} 4.0
vllm:request_queue_time_seconds_count{engine="0",model_name="fake"} 4.0
vllm:request_queue_time_seconds_sum{engine="0",model_name="fake"} 0.5
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="128",cache_dtype="auto",engine="0",num_gpu_blocks="8192"} 1.0
"""


@dataclass
class Behaviour:
    """How the server answers. ttft_s: delay before the first chunk; itl_s: between chunks; tokens: chunks of
    output (one token each, or tokens_per_chunk each); mode: ok, plain_json, malformed, no_done, error_chunk."""

    ttft_s: float = 0.2
    itl_s: float = 0.05
    tokens: int = 5
    tokens_per_chunk: int = 1
    mode: str = "ok"
    api_key: str | None = None
    metrics: str = METRICS
    list_models: bool = True
    models_delay_s: float = 0.0  # how long /v1/models takes to answer
    serial: bool = False  # one stream at a time, as an engine without batching: throughput cannot grow
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as inference servers set it (uvicorn through asyncio, Go's net/http): without it, on a
    # kept-alive connection the first chunk waits for the client's delayed ACK of the headers (up to 40 ms)
    disable_nagle_algorithm = True
    behaviour: Behaviour

    def log_message(self, *args) -> None:  # keep the test output clean
        pass

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, obj: dict) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json")

    def do_GET(self) -> None:
        if self.path == "/v1/models" and self.behaviour.list_models:
            time.sleep(self.behaviour.models_delay_s)
            self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        elif self.path == "/metrics":
            self._send(200, self.behaviour.metrics.encode(), "text/plain; version=0.0.4")
        elif self.path == "/health":
            self._send(200, b"", "text/plain")
        else:
            self._json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        b = self.behaviour
        if b.api_key and self.headers.get("Authorization") != f"Bearer {b.api_key}":
            return self._json(401, {"error": {"message": "Invalid API key", "type": "auth", "code": 401}})
        if body.get("model") != MODEL:
            return self._json(404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}})
        if b.mode == "plain_json":
            return self._json(200, {"choices": [{"text": "hello"}], "usage": {"completion_tokens": 1}})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if b.serial:
            with b.lock:
                self._stream(self.path.endswith("/chat/completions"))
        else:
            self._stream(self.path.endswith("/chat/completions"))

    def _event(self, data: str) -> None:
        payload = f"data: {data}\n\n".encode()
        self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.wfile.flush()

    def _stream(self, chat: bool) -> None:
        b = self.behaviour
        if chat:
            self._event(json.dumps({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}))
        time.sleep(b.ttft_s)
        chunks = b.tokens // b.tokens_per_chunk
        for i in range(chunks):
            if i:
                time.sleep(b.itl_s)
            if b.mode == "malformed" and i == 1:
                self._event("{not json")
            elif b.mode == "error_chunk" and i == 1:
                self._event(json.dumps({"error": {"message": "engine died", "code": 500}}))
            piece = " tok" * b.tokens_per_chunk
            choice = {"index": 0, "delta": {"content": piece}} if chat else {"index": 0, "text": piece}
            self._event(json.dumps({"choices": [choice]}))
        self._event(json.dumps({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": b.tokens,
                                                           "total_tokens": 7 + b.tokens}}))
        if b.mode != "no_done":
            self._event("[DONE]")
        self.wfile.write(b"0\r\n\r\n")


@contextmanager
def fake_server(**behaviour):
    """The server on a free port of 127.0.0.1 for a with block; yields its base URL and its Behaviour."""
    b = Behaviour(**behaviour)
    handler = type("Handler", (_Handler,), {"behaviour": b})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", b
    finally:
        server.shutdown()
        server.server_close()
