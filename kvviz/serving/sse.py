"""One request to an OpenAI-compatible server, streamed as server-sent events and timed as it arrives.

The stream is read as bytes and parsed as little as possible: split on newlines, keep the lines that start
with `data:`, stop at `data: [DONE]`, json.loads each chunk (a chunk is a few hundred bytes) and look at
two keys. The client and the server may share a machine's cores, so every microsecond spent here is one the
server does not get. A chunk that carries output is one arrival: in /v1/completions any chunk with a choice
(vLLM's benchmark counts empty texts too: a token may be half a UTF-8 character), in /v1/chat/completions a
choice's delta that is not the opening role announcement. Failures become one line in the record's error
(HTTP status and the server's own message, a reply that is not a stream, malformed SSE, an error chunk).
This module knows HTTP and the OpenAI wire format, not loads or statistics.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import httpx

from kvviz.base.errors import first_line
from kvviz.base.inputs import clip
from kvviz.serving.endpoint import CHAT, Endpoint
from kvviz.serving.prompts import Prompt
from kvviz.serving.record import RequestRecord

ERROR_BODY_BYTES = 2_000  # of an error reply's body, enough for its message


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


def server_message(status: int, body: bytes) -> str:
    """One line for an error reply: its status and the message of an OpenAI-style error body, if any."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
        err = data.get("error", data) if isinstance(data, dict) else data
        text = str(err.get("message") or err.get("detail") or err) if isinstance(err, dict) else str(err)
    except ValueError:
        pass
    hint = " (set KVVIZ_API_KEY or pass --api-key)" if status in (401, 403) else ""
    return f"HTTP {status}{hint}: {first_line(RuntimeError(text)) if text else 'no message'}"


class _Stream:
    """What the chunks of one stream have told so far."""

    def __init__(self, chat: bool, t0: float, on_arrival: Callable[[int], None] | None) -> None:
        self.chat, self.t0, self.on_arrival = chat, t0, on_arrival
        self.arrivals: list[float] = []
        self.usage: dict | None = None
        self.done = False

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
            shown = clip(data.decode("utf-8", "replace"))
            raise ValueError(f"malformed SSE: a data line that is not JSON: {shown!r}") from None
        if not isinstance(chunk, dict):
            raise ValueError(f"malformed SSE: a data line that is not a JSON object: {clip(repr(chunk))}")
        if "error" in chunk:
            err = chunk["error"]
            said = err.get("message", err) if isinstance(err, dict) else err
            raise ValueError(f"the server sent an error: {first_line(RuntimeError(str(said)))}")
        choices = chunk.get("choices")
        if choices and (not self.chat or "role" not in (choices[0].get("delta") or {})):
            self.arrivals.append(now - self.t0)
            if self.on_arrival is not None:
                self.on_arrival(len(self.arrivals))
        if chunk.get("usage"):
            self.usage = chunk["usage"]


async def _read(resp: httpx.Response, stream: _Stream) -> None:
    """Split the body into lines as bytes arrive; each line is stamped with the time its bytes came. An
    uncompressed body (what inference servers send) is read raw, past httpx's decoders."""
    pending = b""
    plain = resp.headers.get("content-encoding", "identity") == "identity"
    async for block in resp.aiter_raw() if plain else resp.aiter_bytes():
        now = time.perf_counter()
        pending += block
        *lines, pending = pending.split(b"\n")
        for raw in lines:
            stream.line(raw.rstrip(b"\r"), now)
            if stream.done:
                return
    if pending:
        stream.line(pending.rstrip(b"\r"), time.perf_counter())
    if not stream.done:
        raise ValueError("malformed SSE: the stream ended before data: [DONE]"
                         if stream.arrivals else "the server closed the stream without sending any data")


async def stream_request(client: httpx.AsyncClient, ep: Endpoint, prompt: Prompt, index: int, sent_s: float,
                         output_tokens: int, ignore_eos: bool = True,
                         on_arrival: Callable[[int], None] | None = None) -> RequestRecord:
    """Send one request and time its stream. Never raises for what the server did: the record's error says it.
    Cancellation (the run stopping) propagates."""
    t0 = time.perf_counter()
    stream = _Stream(ep.api == CHAT, t0, on_arrival)
    accepted = error = None
    try:
        async with client.stream("POST", ep.url, json=payload(ep, prompt, output_tokens, ignore_eos),
                                 headers=ep.headers()) as resp:
            accepted = time.perf_counter() - t0
            if resp.status_code != 200:
                body = b""
                async for block in resp.aiter_bytes():
                    body += block
                    if len(body) >= ERROR_BODY_BYTES:
                        break
                raise ValueError(server_message(resp.status_code, body[:ERROR_BODY_BYTES]))
            kind = resp.headers.get("content-type", "").split(";")[0].strip()
            if kind != "text/event-stream":
                raise ValueError(f"the server answered with {kind or 'no content type'}, not a stream "
                                 "(text/event-stream): it does not stream this request")
            await _read(resp, stream)
    except httpx.HTTPError as exc:
        error = transport_message(exc, ep.url)
    except ValueError as exc:
        error = first_line(exc)
    return _record(stream, prompt, index, sent_s, accepted, error)


def transport_message(exc: httpx.HTTPError, url: str) -> str:
    """One line for a failure below HTTP: refused, unresolvable, timed out, cut off."""
    if isinstance(exc, httpx.ConnectError):
        return f"cannot reach {url}: {first_line(exc)}"
    if isinstance(exc, httpx.TimeoutException):
        return f"{url} did not answer in time ({type(exc).__name__})"
    return f"{url}: {type(exc).__name__}: {first_line(exc)}"


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
        usage_reported=isinstance(new_tokens, int), error=error)
