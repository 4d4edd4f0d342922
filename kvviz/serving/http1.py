"""A small HTTP/1.1 client on asyncio for a load's hot path: keep-alive connections to one server, a request
written in one piece, its reply decoded (status, headers, Content-Length or chunked body) inside the protocol's
data_received and handed, with the time its bytes came, to a Reply the caller gives.

Why not httpx: a load of hundreds of streams in flight sends tens of thousands of chunks a second, and each
chunk that goes through httpx, httpcore, h11 and anyio costs a task wake-up, a cancel scope, a reader paused and
resumed and several layers of Python (120-150 µs of CPU a token on a 2-core machine, and, without sniffio
installed, a failing `import sniffio` on every lock httpcore makes); the client then measures its own queue.
Here a chunk costs one call of data_received and a few slices (about 15-35 µs a token there). And its time is
not when Python got to it: connections are stamped.StampedSockets, so each piece of a reply carries the time
the kernel received its bytes, and the pool keeps how long every read's bytes waited for this process (the
client's own lag, per read). Plain http and https (SSL_CERT_FILE/SSL_CERT_DIR, else certifi's CA bundle, as
httpx); no proxies, no redirects, no compression (Accept-Encoding: identity): what an inference server's
streaming endpoint needs, nothing more. Failures are HttpError, one line each. Knows HTTP/1.1, not SSE or
loads.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import time
from array import array
from dataclasses import dataclass
from urllib.parse import urlsplit

from kvviz.base.errors import KvvizError
from kvviz.serving.stamped import StampedSocket, stamped_socket

CONNECT_TIMEOUT_S = 10.0
DRAIN_GRACE_S = 1.0
MAX_HEAD_BYTES = 64 * 1024
_HEAD, _LENGTH, _CHUNKED, _UNTIL_CLOSE, _DONE = range(5)


class HttpError(KvvizError):
    """A request that got no usable HTTP reply: unreachable, timed out connecting, cut off, not HTTP. One line."""


class Reply:
    """What receives a reply as it comes: sent() with the time its request is written (a retry writes it again),
    head() once, then body() with each piece of the decoded body and the time its bytes arrived; head and body
    may return True when the Reply has had all it wants (see Connection). Exceptions raised here end the request
    with them. body's waited: how long the read's bytes waited for this process (0 where not stamped)."""

    def sent(self, now: float) -> None:
        return None

    def head(self, status: int, headers: dict[str, str], now: float) -> bool:
        return False

    def body(self, data: bytes, now: float, waited: float = 0.0) -> bool:
        return False


@dataclass(frozen=True)
class Origin:
    """Where connections go: scheme, host and port of a base URL, and the TLS context for https."""

    scheme: str
    host: str
    port: int
    ssl: ssl.SSLContext | None

    @classmethod
    def of(cls, url: str) -> Origin:
        parts = urlsplit(url)
        https = parts.scheme == "https"
        return cls(parts.scheme, parts.hostname or "", parts.port or (443 if https else 80),
                   _tls_context() if https else None)

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


def _tls_context() -> ssl.SSLContext:
    """Certificates checked as httpx checks them (the same endpoint passes or fails both): against
    SSL_CERT_FILE or SSL_CERT_DIR when set, else certifi's bundle, else the system's."""
    if os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    if os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=os.environ["SSL_CERT_DIR"])
    try:
        import certifi
    except ImportError:
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=certifi.where())


def request_bytes(origin: Origin, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> bytes:
    """One request as written on the wire: request line, headers (Host, Content-Length, identity encoding,
    keep-alive), the body."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {origin.host_header}", "Accept-Encoding: identity",
             "User-Agent: kvviz", *(f"{k}: {v}" for k, v in headers.items())]
    if body or method in ("POST", "PUT"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class Connection(asyncio.Protocol):
    """One keep-alive connection: one request at a time, its reply decoded as bytes arrive. A request ends when
    its reply ends, and the connection goes back to its pool then. Once the Reply has had all it wants (a stream
    after `data: [DONE]`), the rest is read and dropped, and the request ends at most DRAIN_GRACE_S later even
    if the reply does not (the connection is then closed): a server that sends [DONE] and the end of its
    chunked body in two writes costs neither a new connection nor a wait, and one that never ends its body
    does not hold the load. The times the Reply was given are unaffected either way."""

    def __init__(self, pool: Pool, sock: StampedSocket) -> None:
        self.pool, self.sock = pool, sock
        self.transport: asyncio.Transport | None = None
        self.reply: Reply | None = None  # None once it wants no more (the rest of the reply is read and dropped)
        self.done: asyncio.Future | None = None
        self.buffer = b""
        self.state = _DONE
        self.left = 0  # body bytes still to come: of the Content-Length, or of the current chunk (-1: a size line)
        self.crlf = False  # a chunk's data ended: its CRLF is next
        self.reusable = True
        self.grace: asyncio.TimerHandle | None = None
        self.uses = 0
        self.got_bytes = False
        self.waited = 0.0  # the current read's wait for this process

    # -- asyncio.Protocol --------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.reusable = False
        self.pool.forget(self)
        if self.state == _UNTIL_CLOSE:
            self._end()
        elif self.state != _DONE:
            self._fail(HttpError("http.cut_off_why", url=self.pool.url, why=_reason(exc)) if exc else
                       HttpError("http.cut_off", url=self.pool.url))

    def data_received(self, data: bytes) -> None:
        sock = self.sock
        now = sock.arrived_at  # when the kernel got these bytes: every timestamp of the load is this
        self.waited = sock.read_at - now
        if sock.stamped:
            self.pool.waits.append(self.waited)
        if self.state == _DONE:
            self.reusable = False  # bytes nobody asked for: this connection's framing cannot be trusted
            return
        self.got_bytes = True
        try:
            self._decode(self.buffer + data if self.buffer else data, now)
        except Exception as exc:
            self._fail(exc)

    # -- requests ----------------------------------------------------------------------------------------------

    async def send(self, data: bytes, reply: Reply) -> None:
        """Write one request and wait until `reply` has had its reply (or all it wanted of it)."""
        self.reply, self.state, self.buffer, self.got_bytes = reply, _HEAD, b"", False
        self.uses += 1
        self.done = asyncio.get_running_loop().create_future()
        reply.sent(time.perf_counter())  # the request's t0: when it goes on the wire, not when it was made
        self.transport.write(data)
        try:
            await self.done
        except BaseException:
            self.close()  # cancelled or failed mid-reply: the rest of it would confuse the next request
            raise

    def close(self) -> None:
        self.reusable = False
        if self.transport is not None:
            self.transport.abort()

    def _answered(self) -> None:
        """The Reply has all it wants: the rest of the reply is read and dropped, for DRAIN_GRACE_S at most."""
        self.reply = None
        if self.state == _UNTIL_CLOSE:  # only the close would end this reply: end it now
            self.close()
            self._resolve()
        elif self.grace is None:
            self.grace = asyncio.get_running_loop().call_later(DRAIN_GRACE_S, self._give_up)

    def _give_up(self) -> None:
        """The reply did not end within the grace after the Reply had enough: end the request, drop the connection."""
        self.close()
        self._resolve()

    def _resolve(self) -> None:
        if self.grace is not None:
            self.grace.cancel()
            self.grace = None
        if self.done is not None and not self.done.done():
            self.done.set_result(None)

    def _end(self) -> None:
        """The reply ended: the request too, and the connection is free again."""
        self.state, self.reply = _DONE, None
        if self.reusable:
            self.pool.release(self)
        self._resolve()

    def _fail(self, exc: Exception) -> None:
        self.state, self.reply = _DONE, None
        if self.grace is not None:  # the Reply had what it wanted: the request ends as it was, not as a failure
            return self._give_up()
        self.close()
        if self.done is not None and not self.done.done():
            self.done.set_exception(exc)

    def _deliver(self, data: bytes, now: float) -> None:
        if self.reply is not None and data and self.reply.body(data, now, self.waited):
            self._answered()

    # -- decoding ----------------------------------------------------------------------------------------------

    def _decode(self, buf: bytes, now: float) -> None:
        if self.state == _HEAD:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD_BYTES:
                    raise HttpError("http.endless_head", url=self.pool.url)
                self.buffer = buf
                return
            self.buffer = b""
            status, headers = _head(buf[:end], self.pool.url)
            self._framing(status, headers)
            if self.reply.head(status, headers, now):
                self._answered()
            buf = buf[end + 4:]
            if self.state == _DONE:
                return self._end()
        if self.state == _CHUNKED:
            self._chunks(buf, now)
        elif self.state == _LENGTH:
            take = buf[: self.left]
            self.left -= len(take)
            if len(take) < len(buf):
                self.reusable = False
            self._deliver(take, now)
            if self.left == 0:
                self._end()
        elif self.state == _UNTIL_CLOSE:
            self._deliver(buf, now)

    def _framing(self, status: int, headers: dict[str, str]) -> None:
        """How the body is delimited (RFC 9112 §6.3): none for 1xx/204/304, chunked, Content-Length, or the close."""
        if headers.get("connection", "").lower() == "close":
            self.reusable = False
        if status < 200 or status in (204, 304):
            self.state = _DONE
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            self.state, self.left, self.crlf = _CHUNKED, -1, False
        elif "content-length" in headers:
            self.left = int(headers["content-length"])
            self.state = _LENGTH if self.left else _DONE
        else:
            self.state, self.reusable = _UNTIL_CLOSE, False

    def _chunks(self, buf: bytes, now: float) -> None:
        """Chunked transfer decoding: size line, data, CRLF, ..., a zero size, trailers, CRLF. The data of all
        the chunks in `buf` goes to the Reply in one piece."""
        pos, pieces, n = 0, [], len(buf)
        while pos < n:
            if self.crlf:  # the CRLF after a chunk's data
                if n - pos < 2:
                    break
                pos, self.crlf, self.left = pos + 2, False, -1
            elif self.left < 0:  # a size line
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                size = int(buf[pos:eol].split(b";", 1)[0], 16)
                if size == 0:  # the last chunk: then trailers (usually none) and an empty line
                    end = eol if buf[eol + 2: eol + 4] == b"\r\n" else buf.find(b"\r\n\r\n", eol + 2)
                    if end < 0:
                        break
                    self._deliver(b"".join(pieces), now)
                    if end + 4 < n:
                        self.reusable = False
                    return self._end()
                pos, self.left = eol + 2, size
            else:  # chunk data
                take = min(self.left, n - pos)
                pieces.append(buf[pos: pos + take])
                pos += take
                self.left -= take
                if self.left == 0:
                    self.crlf = True
        self.buffer = buf[pos:]
        self._deliver(b"".join(pieces), now)


def _head(raw: bytes, url: str) -> tuple[int, dict[str, str]]:
    """The status and the headers (names lower-cased) of a reply's head."""
    lines = raw.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    if not version.startswith("HTTP/1."):
        raise HttpError("http.not_http11", url=url, what=lines[0][:60])
    try:
        status = int(rest[:3])
    except ValueError:
        raise HttpError("http.not_http11", url=url, what=lines[0][:60]) from None
    return status, {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}


class Pool:
    """Keep-alive connections to one origin, opened as needed and reused; as many as are asked for at once."""

    def __init__(self, url: str, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        self.url = url
        self.origin = Origin.of(url)
        self.path_prefix = urlsplit(url).path.rstrip("/")  # a server behind a path (http://host/llm/v1/...)
        self.connect_timeout_s = connect_timeout_s
        self.idle: list[Connection] = []
        self.open: set[Connection] = set()
        self.waits = array("d")  # per read: how long its bytes waited for this process (s), where stamped

    async def connection(self) -> Connection:
        """An idle connection, or a new one."""
        while self.idle:
            conn = self.idle.pop()
            if conn.reusable:
                return conn
        return await self.connect()

    async def connect(self) -> Connection:
        """A new connection (TLS for https), its socket stamped; HttpError when it cannot be made."""
        try:
            conn = await asyncio.wait_for(self._connect(), self.connect_timeout_s)
        except asyncio.TimeoutError:
            raise HttpError("http.timeout", url=self.url, kind="ConnectTimeout") from None
        except (OSError, ssl.SSLError) as exc:
            raise HttpError("http.unreachable", url=self.url, why=_reason(exc)) from None
        self.open.add(conn)
        return conn

    async def _connect(self) -> Connection:
        loop = asyncio.get_running_loop()
        o = self.origin
        failure: OSError | None = None
        for family, kind, proto, _, address in await loop.getaddrinfo(o.host, o.port, type=socket.SOCK_STREAM):
            sock = stamped_socket(family, kind, proto)
            try:
                await loop.sock_connect(sock, address)
            except OSError as exc:
                sock.close()
                failure = exc
                continue
            _, conn = await loop.create_connection(lambda s=sock: Connection(self, s), sock=sock, ssl=o.ssl,
                                                   server_hostname=o.host if o.ssl else None)
            return conn
        raise failure or OSError(f"no address for {o.host}")

    async def warm(self, count: int) -> None:
        """Open `count` connections at once and keep them idle (a run's requests then find them ready)."""
        opened = await asyncio.gather(*(self.connect() for _ in range(count - len(self.idle))))
        self.idle.extend(opened)

    def release(self, conn: Connection) -> None:
        self.idle.append(conn)

    def forget(self, conn: Connection) -> None:
        self.open.discard(conn)

    def close(self) -> None:
        for conn in list(self.open):
            conn.close()
        self.idle.clear()

    async def send(self, data: bytes, reply: Reply) -> None:
        """Send on an idle connection or a new one. A reused connection the server closed while it sat idle
        (keep-alive timeouts: uvicorn's is 5 s) fails before any byte of its reply: that request goes again,
        once, on a fresh connection."""
        conn = await self.connection()
        reused = conn.uses > 0
        try:
            await conn.send(data, reply)
        except HttpError:
            if not reused or conn.got_bytes:
                raise
            await (await self.connect()).send(data, reply)


def _reason(exc: BaseException) -> str:
    """An OS or TLS error in one line: the system's words for its error number (asyncio's own text adds the
    address the URL already gives), else its text, else its type's name."""
    number = getattr(exc, "errno", None)
    if isinstance(exc, OSError) and not isinstance(exc, ssl.SSLError) and isinstance(number, int) and number > 0:
        return os.strerror(number)
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
