"""The load's HTTP/1.1 client (kvviz.serving.http1) against raw servers on 127.0.0.1 that write known bytes in
known pieces: bodies decoded whole however the bytes are split, connections kept alive and reused, failures as
one line, and each piece timed by the kernel's stamp, not by when the client got to it."""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from contextlib import contextmanager

import pytest

from kvviz.serving.endpoint import EndpointError, endpoint
from kvviz.serving.http1 import HttpError, Pool, Reply, request_bytes
from kvviz.serving.load import Load
from kvviz.serving.loadgen import run
from kvviz.serving.prompts import synthetic
from kvviz.serving.timed_server import timed_server

pytestmark = pytest.mark.alone  # times what the machine does: run with nothing beside it (README)


class Recorder(Reply):
    """Keeps what a reply said and the time of each piece; has had enough once `enough_after` came."""

    def __init__(self, enough_after: bytes | None = None) -> None:
        self.status, self.headers, self.data, self.times = None, {}, b"", []
        self.enough_after = enough_after

    def head(self, status, headers, now):
        self.status, self.headers = status, headers
        return False

    def body(self, data, now, waited=0.0):
        self.data += data
        self.times.append(now)
        return self.enough_after is not None and self.enough_after in self.data


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


class RawServer:
    """A server on its own thread and event loop (so a client that blocks does not block it) that answers each
    request on a connection with the next of `replies` (bytes, written in `pieces` pieces; or a list of the
    pieces), the pieces `pause_s` apart, and closes the connection after them when close_after. Keeps the
    connections it accepted and its write times."""

    def __init__(self, replies, pieces: int = 1, pause_s: float = 0.0, close_after: bool = False) -> None:
        self.replies, self.pieces, self.pause_s, self.close_after = replies, pieces, pause_s, close_after
        self.accepted, self.written = 0, []
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, args=(ready,), daemon=True)
        self.thread.start()
        ready.wait(10)

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = self.server.sockets[0].getsockname()[1]
        ready.set()
        self.loop.run_forever()

    async def _handle(self, reader, writer) -> None:
        self.accepted += 1
        try:
            for reply in self.replies:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length")), 0)
                await reader.readexactly(length)
                if isinstance(reply, bytes):
                    step = max(1, -(-len(reply) // self.pieces))
                    reply = [reply[i:i + step] for i in range(0, len(reply), step)]
                for i, piece in enumerate(reply):
                    if i and self.pause_s:
                        await asyncio.sleep(self.pause_s)
                    writer.write(piece)
                    await writer.drain()
                    self.written.append(time.perf_counter())
                if self.close_after:
                    break
            else:
                await reader.read()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        async def stop() -> None:
            self.server.close()
            self.loop.stop()

        asyncio.run_coroutine_threadsafe(stop(), self.loop)
        self.thread.join(10)


@contextmanager
def raw_server(replies, **how):
    server = RawServer(replies, **how)
    try:
        yield server
    finally:
        server.close()


def _go(coro):
    return asyncio.run(coro)


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
BODY = [b"data: one\n\n", b"data: two\n\n", b"data: [DONE]\n\n"]


@pytest.mark.parametrize("pieces", [1, 3, 17, 200])
def test_a_chunked_body_is_decoded_whole_however_its_bytes_are_split(pieces):
    """The same reply written in 1 to 200 pieces (one byte at a time at the end): the same head and body."""
    async def go(url):
        pool = Pool(url)
        got = Recorder()
        await pool.send(request_bytes(pool.origin, "POST", "/x", {}, b"{}"), got)
        pool.close()
        return got

    with raw_server([HEAD + chunked(*BODY)], pieces=pieces, pause_s=0.001) as server:
        got = _go(go(server.url))
    assert got.status == 200 and got.headers["content-type"] == "text/event-stream"
    assert got.data == b"".join(BODY)


def test_connections_are_kept_alive_and_reused():
    """Three requests one after another on one pool: one connection, three whole replies (Content-Length)."""
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"

    async def go(url):
        pool = Pool(url)
        bodies = []
        for _ in range(3):
            got = Recorder()
            await pool.send(request_bytes(pool.origin, "GET", "/", {}), got)
            bodies.append(got.data)
        pool.close()
        return bodies

    with raw_server([reply] * 3) as server:
        bodies = _go(go(server.url))
    assert bodies == [b"hello"] * 3 and server.accepted == 1


@pytest.mark.parametrize(("rest_after_s", "ends_by_s", "connections"), [(0.2, 0.6, 1), (None, 1.6, 2)])
def test_a_reply_that_has_had_enough_ends_with_its_reply_or_after_the_grace(rest_after_s, ends_by_s, connections):
    """A Reply that wants nothing after `data: two` (as a stream after [DONE]): the rest of the reply, 0.2 s
    later, is read and dropped, the request ends with it and the connection is reused; a rest that never comes
    ends the request after the grace (1 s) and the next request gets a new connection. Neither is an error."""
    reply = HEAD + chunked(*BODY)
    cut = reply.index(b"[DONE]") - len(b"\r\ndata: ")  # the first two chunks; the rest later, or never
    pieces = [reply[:cut], reply[cut:]] if rest_after_s else [reply[:cut]]

    async def go(url):
        pool = Pool(url)
        first = Recorder(enough_after=b"two")
        start = time.perf_counter()
        await pool.send(request_bytes(pool.origin, "POST", "/x", {}, b"{}"), first)
        took = time.perf_counter() - start
        second = Recorder(enough_after=b"two")
        await pool.send(request_bytes(pool.origin, "POST", "/x", {}, b"{}"), second)
        pool.close()
        return first, took, second

    with raw_server([pieces] * 2, pause_s=rest_after_s or 0) as server:
        first, took, second = _go(go(server.url))
    assert b"two" in first.data and b"[DONE]" not in first.data and b"two" in second.data
    assert (rest_after_s or 1.0) - 0.05 < took < ends_by_s, took
    assert server.accepted == connections


def test_a_reply_cut_off_is_one_line():
    """The server closes the connection after half the body: HttpError says so, in one line."""
    cut = (HEAD + chunked(*BODY))[:-20]

    async def go(url):
        pool = Pool(url)
        try:
            await pool.send(request_bytes(pool.origin, "POST", "/x", {}, b"{}"), Recorder())
        finally:
            pool.close()

    with raw_server([cut], close_after=True) as server, \
            pytest.raises(HttpError, match="closed the connection before its answer ended") as err:
        _go(go(server.url))
    assert "\n" not in str(err.value)


def test_a_kept_alive_connection_the_server_closed_while_idle_is_replaced():
    """The server answers once and closes (as a keep-alive timeout does): the next request goes on a new
    connection without an error."""
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

    async def go(url):
        pool = Pool(url)
        bodies = []
        for _ in range(2):
            got = Recorder()
            await pool.send(request_bytes(pool.origin, "GET", "/", {}), got)
            bodies.append(got.data)
            await asyncio.sleep(0.05)  # the server's close reaches the idle connection
        pool.close()
        return bodies

    with raw_server([reply], close_after=True) as server:
        bodies = _go(go(server.url))
    assert bodies == [b"ok", b"ok"] and server.accepted == 2


def test_an_unreachable_server_is_one_line():
    with raw_server([]) as server:
        url = server.url
    with pytest.raises(HttpError, match=r"^cannot reach http://127\.0\.0\.1:\d+: .*refused"):
        _go(Pool(url).connect())


def test_each_read_is_timed_when_its_bytes_arrived_not_when_the_client_got_to_them():
    """The server writes three pieces 100 ms apart. A client that reads at once times each piece at its write. A
    client blocked 300 ms after sending reads them in one go, 100 ms after the last came: the read carries the
    last piece's arrival (the kernel's stamp of the newest bytes), not the read's time, and the pool says the
    read waited about 100 ms."""
    reply = HEAD + chunked(*BODY)
    pieces = [reply[:len(HEAD) + 15], reply[len(HEAD) + 15: len(HEAD) + 32], reply[len(HEAD) + 32:]]

    async def go(url, block_s):
        pool = Pool(url)
        conn = await pool.connection()
        got = Recorder()
        sending = asyncio.ensure_future(conn.send(request_bytes(pool.origin, "POST", "/x", {}, b"{}"), got))
        await asyncio.sleep(0)  # the request goes out
        time.sleep(block_s)  # the client is busy: the replies wait in the kernel
        await sending
        pool.close()
        return got, list(pool.waits)

    with raw_server([pieces], pause_s=0.1) as server:
        prompt, _ = _go(go(server.url, 0.0))
    assert len(prompt.times) == 3 and prompt.data == b"".join(BODY)
    assert all(abs(t - w) < 0.01 for t, w in zip(prompt.times, server.written, strict=True)), (prompt.times,
                                                                                               server.written)
    with raw_server([pieces], pause_s=0.1) as server:
        late, waits = _go(go(server.url, 0.3))
    assert late.data == b"".join(BODY) and len(late.times) == 1, "one read took all three pieces"
    assert abs(late.times[0] - server.written[-1]) < 0.01, "stamped when the newest bytes came, not when read"
    assert max(waits) == pytest.approx(0.1, abs=0.04), waits


def test_https_with_a_certificate_the_client_trusts(tmp_path, monkeypatch):
    """The timed server over TLS with a self-signed certificate: trusted through SSL_CERT_FILE (as httpx trusts
    it), a load completes; without it, the run says in one line that the certificate was refused."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out",
                    str(cert)], check=True, capture_output=True)
    with timed_server(0.05, 0.01, 3, tls=(str(cert), str(key))) as srv:
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        result = run(endpoint(srv.base_url, srv.model), Load(concurrency=2, requests=4, output_tokens=3),
                     synthetic(4, 8))
        assert srv.base_url.startswith("https://") and result.stats.completed == 4
        monkeypatch.delenv("SSL_CERT_FILE")
        with pytest.raises(EndpointError, match=r"(?i)certificate"):
            run(endpoint(srv.base_url, srv.model), Load(requests=1, output_tokens=3), synthetic(1, 8))
