"""Sockets whose reads carry the time their bytes reached the machine, not the time Python got to them.

A client or server on a busy machine reads a socket some time after its bytes came: its event loop was busy
with other sockets, or its process was waiting for a core. Timing a stream by the read would add that wait to
what the other side seems to take. Linux stamps every received packet (SO_TIMESTAMPNS, CLOCK_REALTIME); a
StampedSocket reads with recvmsg, takes the stamp of the last packet read, and turns it into the
time.perf_counter() clock by its age (real time now minus the stamp, subtracted from perf_counter now), so
clock steps and slewing between the two clocks never enter. arrived_at is that time; read_at is when the read
happened; their difference is how long the bytes waited for this process. Where the kernel gives no stamp
(other systems), arrived_at is the time of the read and `stamped` is False. asyncio's transports call recv and
recv_into, so a StampedSocket handed to loop.create_connection(sock=...) (or accepted by a Listener) times
every read of a protocol, TLS included. Knows sockets and clocks, nothing of HTTP.
"""

from __future__ import annotations

import socket
import struct
import sys
import time

# SO_TIMESTAMPNS is 35 on Linux's common architectures (asm-generic); Python 3.11 does not export the name.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform == "linux" else None)
ANCILLARY_BYTES = socket.CMSG_SPACE(16) if hasattr(socket, "CMSG_SPACE") else 64


class StampedSocket(socket.socket):
    """A socket that remembers, for its last read, when its bytes arrived (arrived_at) and when they were read
    (read_at), both on the perf_counter clock."""

    stamped = False
    arrived_at = 0.0
    read_at = 0.0

    def enable_stamps(self) -> None:
        """Ask the kernel to stamp received packets; without support, reads are timed when they happen."""
        if SO_TIMESTAMPNS is None or not hasattr(self, "recvmsg"):
            return
        try:
            self.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            self.stamped = True
        except OSError:
            self.stamped = False

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        if not self.stamped:
            data = super().recv(bufsize, flags)
            self.read_at = self.arrived_at = time.perf_counter()
            return data
        data, ancillary, _, _ = self.recvmsg(bufsize, ANCILLARY_BYTES, flags)
        self._stamp(ancillary)
        return data

    def recv_into(self, buffer, nbytes: int = 0, flags: int = 0) -> int:
        if not self.stamped:
            n = super().recv_into(buffer, nbytes, flags)
            self.read_at = self.arrived_at = time.perf_counter()
            return n
        view = memoryview(buffer)
        n, ancillary, _, _ = self.recvmsg_into([view[:nbytes] if nbytes else view], ANCILLARY_BYTES, flags)
        self._stamp(ancillary)
        return n

    def _stamp(self, ancillary: list) -> None:
        real, perf = time.time(), time.perf_counter()
        self.read_at = self.arrived_at = perf
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 8:
                sec, nsec = struct.unpack("qq", data[:16]) if len(data) >= 16 else struct.unpack("ll", data[:8])
                self.arrived_at = perf - max(0.0, real - (sec + nsec * 1e-9))


def stamped_socket(family: int, kind: int = socket.SOCK_STREAM, proto: int = 0) -> StampedSocket:
    """A new non-blocking StampedSocket with stamps enabled."""
    sock = StampedSocket(family, kind, proto)
    sock.setblocking(False)
    sock.enable_stamps()
    return sock


class Listener(socket.socket):
    """A listening socket whose accepted connections are StampedSockets (asyncio's servers call accept()); a
    protocol finds its own with claim(its transport's socket's fileno())."""

    def accept(self) -> tuple[StampedSocket, object]:
        fd, address = self._accept()
        sock = StampedSocket(self.family, self.type, self.proto, fileno=fd)
        if socket.getdefaulttimeout() is None and self.gettimeout():
            sock.setblocking(True)
        sock.enable_stamps()
        self.__dict__.setdefault("accepted", {})[fd] = sock
        return sock, address

    def claim(self, fd: int) -> StampedSocket | None:
        """The accepted StampedSocket of file descriptor fd (once)."""
        return self.__dict__.get("accepted", {}).pop(fd, None)


def listener(host: str, port: int, backlog: int = 4096) -> Listener:
    """A Listener bound to host:port (0: a free port), listening, non-blocking."""
    sock = Listener(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    sock.setblocking(False)
    return sock
