"""One request to an OpenAI-compatible server, streamed as server-sent events and timed as it arrives.

The stream comes through http1.py's connections (a Reply fed the decoded body with the time its bytes arrived)
and is parsed as little as possible: split on newlines, keep the lines that start with `data:`, stop at
`data: [DONE]`, json.loads each chunk (a chunk is a few hundred bytes) and look at two keys. The client and
the server may share a machine's cores, so every microsecond spent here is one the server does not get. A
chunk that carries output is one arrival: in /v1/completions any chunk with a choice (vLLM's benchmark counts
empty texts too: a token may be half a UTF-8 character), in /v1/chat/completions a choice's delta that is not
the opening role announcement. Failures become one line in the record's error (HTTP status and a short reason
taken from the server's message, a reply that is not a stream, malformed SSE, an error chunk, a connection cut
off); whatever of the server's text it quotes is clipped and goes through kvviz.serving.redact first (a server
may echo the request's key). This module
knows the OpenAI wire format (and how httpx's failures read, for the few requests made with it: /v1/models,
/metrics), not loads or statistics.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from kvviz.base.errors import InputError, first_line
from kvviz.base.inputs import clip
from kvviz.i18n import Said, said
from kvviz.serving.endpoint import APIS, CHAT, Endpoint
from kvviz.serving.http1 import HttpError, Pool, Reply, request_bytes
from kvviz.serving.prompts import Prompt
from kvviz.serving.record import RequestRecord
from kvviz.serving.redact import redact

if TYPE_CHECKING:
    import httpx

ERROR_BODY_BYTES = 2_000  # of an error reply's body, enough for its message
REASON_CHARS = 120  # of the server's own words, at most, in a failure's line


def payload(ep: Endpoint, prompt: Prompt, output_tokens: int, ignore_eos: bool) -> dict:
    """The request body: greedy, streamed with a final usage chunk, at most output_tokens tokens (exactly
    that many with ignore_eos, a vLLM and SGLang extension other servers may refuse)."""
    body: dict = {"model": ep.model, "stream": True, "stream_options": {"include_usage": True},
                  "max_tokens": output_tokens, "temperature": 0.0}
    if ep.api == CHAT:
        body["messages"] = [{"role": "user", "content": prompt.text}]
    else:
        body["prompt"] = prompt.text
    if ignore_eos:
        body["ignore_eos"] = True
    return body


def server_message(status: int, body: bytes, keys: tuple[str, ...] = ()) -> Said:
    """One line for an error reply: its status and a short reason, the start of an OpenAI-style error body's
    message (or of the body), clipped and redacted (keys: the run's own, besides the operator's)."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
        err = data.get("error", data) if isinstance(data, dict) else data
        text = str(err.get("message") or err.get("detail") or err) if isinstance(err, dict) else str(err)
    except ValueError:
        pass
    why = _reason(text, keys) if text else "no message"
    if status in (401, 403):
        return said("http.refused_key", status=status, why=why)
    return said("http.refused", status=status, why=why)


def _reason(text: str, keys: tuple[str, ...] = ()) -> str:
    """The server's words, as a failure quotes them: redacted, then the first line, clipped."""
    return clip(first_line(RuntimeError(redact(text, keys))), REASON_CHARS)


class _Stream(Reply):
    """What one stream has told so far: fed by the connection as its bytes arrive (http1.Reply)."""

    def __init__(self, chat: bool, on_arrival: Callable[[int, float], None] | None, keys: tuple[str, ...] = ()) -> None:
        self.chat, self.on_arrival, self.keys = chat, on_arrival, keys
        self.t0 = 0.0
        self.accepted: float | None = None
        self.status: int | None = None  # of a reply that is not 200: its body is kept for its message
        self.error_body = b""
        self.pending = b""
        self.last_now = 0.0
        self.arrivals: list[float] = []
        self.usage: dict | None = None
        self.joined_chunks = 0
        self.done = False

    def sent(self, now: float) -> None:
        self.t0 = now

    def head(self, status: int, headers: dict[str, str], now: float) -> bool:
        self.accepted = now - self.t0
        if status != 200:
            self.status = status
            return False
        kind = headers.get("content-type", "").split(";")[0].strip()
        if kind != "text/event-stream":
            raise InputError("sse.not_a_stream", kind=kind or "no content type")
        return False

    def body(self, data: bytes, now: float, waited: float = 0.0) -> bool:
        """Split the body into lines as bytes arrive; each line is stamped with the time its bytes came (the
        newest bytes' of the read). Chunks that came in one read are counted as joined, but the last."""
        self.last_now = now
        if self.status is not None:
            self.error_body += data
            return len(self.error_body) >= ERROR_BODY_BYTES
        *lines, self.pending = (self.pending + data).split(b"\n")
        before = len(self.arrivals)
        try:
            for raw in lines:
                self.line(raw.rstrip(b"\r"), now)
                if self.done:
                    return True
            return False
        finally:
            self.joined_chunks += max(0, len(self.arrivals) - before - 1)

    def end(self) -> None:
        """The reply ended: what it said, or why it is not a complete stream."""
        if self.status is not None:
            raise InputError("serving.failed", why=server_message(self.status, self.error_body[:ERROR_BODY_BYTES],
                                                                  self.keys))
        if self.pending and not self.done:
            self.line(self.pending.rstrip(b"\r"), self.last_now)
        if not self.done:
            raise InputError("sse.no_done") if self.arrivals else InputError("sse.no_data")

    def line(self, raw: bytes, now: float) -> None:
        """One line of the stream: a data line is a chunk or the end; anything else (comments, blank lines,
        event: and id: fields) carries nothing here."""
        if not raw.startswith(b"data:"):
            return
        data = raw[5:].strip()
        if data == b"[DONE]":
            self.done = True
            return
        try:
            chunk = json.loads(data)
        except ValueError:
            raise InputError("sse.not_json", line=_reason(data.decode("utf-8", "replace"), self.keys)) from None
        if not isinstance(chunk, dict):
            raise InputError("sse.not_object", line=_reason(repr(chunk), self.keys))
        if "error" in chunk:
            err = chunk["error"]
            said = err.get("message", err) if isinstance(err, dict) else err
            raise InputError("sse.server_error", why=_reason(str(said), self.keys))
        choices = chunk.get("choices")
        if choices and (not self.chat or "role" not in (choices[0].get("delta") or {})):
            self.arrivals.append(now - self.t0)
            if self.on_arrival is not None:
                self.on_arrival(len(self.arrivals), now)
        if chunk.get("usage"):
            self.usage = chunk["usage"]


def request_for(pool: Pool, ep: Endpoint, prompt: Prompt, output_tokens: int, ignore_eos: bool) -> bytes:
    """The bytes of one streamed request to the endpoint's API."""
    body = json.dumps(payload(ep, prompt, output_tokens, ignore_eos), separators=(",", ":")).encode()
    path = pool.path_prefix + APIS[ep.api]
    return request_bytes(pool.origin, "POST", path, {"Content-Type": "application/json", **ep.headers()}, body)


async def stream_request(pool: Pool, ep: Endpoint, prompt: Prompt, index: int, start: float,
                         output_tokens: int, ignore_eos: bool = True,
                         on_arrival: Callable[[int, float], None] | None = None,
                         data: bytes | None = None) -> RequestRecord:
    """Send one request (data: its bytes, request_for's, when the caller made them beforehand) and time its stream
    from t0, the moment it is written to its connection (its record's sent_s is t0 - start, start being the
    run's perf_counter origin); on_arrival(chunks so far, the chunk's arrival time) on every output chunk. Never
    raises for what the server did: the record's error says it. Cancellation (the run stopping) propagates."""
    stream = _Stream(ep.api == CHAT, on_arrival, (ep.api_key,) if ep.api_key else ())
    data = data or request_for(pool, ep, prompt, output_tokens, ignore_eos)
    stream.t0 = time.perf_counter()  # until the request is written (a connection that cannot be had never is)
    error = None
    try:
        await pool.send(data, stream)
        if not stream.done:
            stream.end()
    except HttpError as exc:
        error = first_line(exc)
    except ValueError as exc:
        error = first_line(exc)
    return _record(stream, prompt, index, stream.t0 - start, stream.accepted, error)


def transport_message(exc: httpx.HTTPError, url: str) -> Said:
    """One line for a failure of an httpx request below HTTP: refused, unresolvable, timed out, cut off."""
    import httpx

    if isinstance(exc, httpx.ConnectError):
        return said("http.unreachable", url=url, why=first_line(exc))
    if isinstance(exc, httpx.TimeoutException):
        return said("http.timeout", url=url, kind=type(exc).__name__)
    return said("http.transport", url=url, kind=type(exc).__name__, why=first_line(exc))


def _record(stream: _Stream, prompt: Prompt, index: int, sent_s: float, accepted: float | None,
            error: str | None) -> RequestRecord:
    usage = stream.usage or {}
    arrivals = tuple(stream.arrivals)
    prompt_tokens = usage.get("prompt_tokens") or prompt.tokens
    new_tokens = usage.get("completion_tokens")
    return RequestRecord(
        index=index, sent_s=sent_s, prompt_tokens=prompt_tokens,
        new_tokens=new_tokens if isinstance(new_tokens, int) else len(arrivals),
        accepted_s=accepted, ttft_s=arrivals[0] if arrivals and error is None else None,
        e2e_s=arrivals[-1] if arrivals and error is None else None, arrivals_s=arrivals,
        usage_reported=isinstance(new_tokens, int), error=error, joined_chunks=stream.joined_chunks)
