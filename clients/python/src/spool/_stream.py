"""spool-stream/1 for the asyncio client: the API's calls as binary frames of
one multiplexed TCP connection ("Stream transport" in docs/protocol.md).

Each frame carries exactly the request and the answer HTTP would exchange, so
the client decodes answers and errors as it does over HTTP; the stream only
saves the per-request work of HTTP/1.1, which is most of what a busy worker
spends on a call.
"""

from __future__ import annotations

import asyncio
import struct
import urllib.request
from typing import Dict, List, Optional, Tuple
from urllib.parse import urlsplit

PROTOCOL = "spool-stream/1"
# Statuses of a refused upgrade that say the server (or a proxy in front of it)
# does not serve the stream at all: the client then speaks HTTP for good.
UNKNOWN_STREAM = frozenset({400, 404, 405, 426, 501, 505})
# Bounds: one answer frame; the head and body of a refused upgrade; the dial
# and upgrade.
_MAX_ANSWER = 1 << 30
_MAX_REFUSAL = 64 << 10
_DIAL_TIMEOUT = 10.0

_U32 = struct.Struct(">I")
_ANSWER = struct.Struct(">IH")  # id, status
_REQUEST = struct.Struct(">IIB")  # length, id, method length
_U16 = struct.Struct(">H")


class StreamError(Exception):
    """The stream could not carry a call: no connection, or it broke. ``sent`` is
    False when the call never left, so that it may go again at once."""

    def __init__(self, message: str, sent: bool = True) -> None:
        super().__init__(message)
        self.sent = sent


class StreamRefused(Exception):
    """The server answered the upgrade with ``status`` (and ``body``), not 101."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"upgrade to {PROTOCOL} refused: {status}")
        self.status = status
        self.body = body


def streamable(url: str) -> bool:
    """Whether the stream can reach ``url``: http://, with a host, that no proxy of
    the environment covers."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        return False
    proxies = urllib.request.getproxies()
    if "http" not in proxies and "all" not in proxies:
        return True
    return bool(urllib.request.proxy_bypass_environment(parts.hostname))


class _Connection(asyncio.Protocol):
    """One stream connection: the upgrade, then frames. Calls wait on futures
    keyed by their ids; writes made in one turn of the loop share a system call."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._transport: Optional[asyncio.Transport] = None
        self._buf = bytearray()
        self._calls: Dict[int, "asyncio.Future[Tuple[int, bytes]]"] = {}
        self._next_id = 0
        self._out: List[bytes] = []
        self._flush_pending = False
        self.upgraded: "asyncio.Future[None]" = loop.create_future()
        self.closed = False

    # ---- asyncio.Protocol ---------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._buf += data
        if not self.upgraded.done():
            self._read_upgrade(eof=False)
            if not self.upgraded.done() or self.upgraded.exception() is not None:
                return
        self._read_frames()

    def eof_received(self) -> Optional[bool]:
        if not self.upgraded.done():
            self._read_upgrade(eof=True)
        return None

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.closed = True
        err = StreamError(f"stream closed: {exc}" if exc else "stream closed by the server")
        if not self.upgraded.done():
            self.upgraded.set_exception(err)
        calls, self._calls = self._calls, {}
        for fut in calls.values():
            if not fut.done():
                fut.set_exception(err)

    # ---- the upgrade ----------------------------------------------------------

    def _read_upgrade(self, eof: bool) -> None:
        """Reads the answer to the upgrade: 101 opens the stream; any other status
        is a refusal, read with its body (bounded) before the connection closes."""
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            if eof or len(self._buf) > _MAX_REFUSAL:
                self._fail_upgrade(StreamError("bad answer to the stream upgrade"))
            return
        lines = bytes(self._buf[:end]).decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        try:
            status = int(parts[1])
        except (IndexError, ValueError):
            self._fail_upgrade(StreamError(f"bad answer to the stream upgrade: {lines[0]!r}"))
            return
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        rest = self._buf[end + 4:]
        if status == 101:
            if headers.get("upgrade", "").lower() != PROTOCOL:
                self._fail_upgrade(StreamError(f"server switched to {headers.get('upgrade')!r}, not {PROTOCOL}"))
                return
            self._buf = bytearray(rest)
            self.upgraded.set_result(None)
            return
        body = _refusal_body(headers, bytes(rest), eof)
        if body is not None:
            self._fail_upgrade(StreamRefused(status, body))

    def _fail_upgrade(self, err: Exception) -> None:
        if not self.upgraded.done():
            self.upgraded.set_exception(err)
        self.close()

    # ---- frames ---------------------------------------------------------------

    def _read_frames(self) -> None:
        buf = self._buf
        at, n = 0, len(buf)
        while n - at >= 4:
            (length,) = _U32.unpack_from(buf, at)
            if length < _ANSWER.size or length > _MAX_ANSWER:
                self.close()
                return
            if n - at - 4 < length:
                break
            call_id, status = _ANSWER.unpack_from(buf, at + 4)
            body = bytes(buf[at + 4 + _ANSWER.size:at + 4 + length])
            at += 4 + length
            fut = self._calls.pop(call_id, None)
            if fut is not None and not fut.done():
                fut.set_result((status, body))
        if at:
            del buf[:at]

    def send(self, method: str, target: str, body: bytes) -> Tuple[int, "asyncio.Future[Tuple[int, bytes]]"]:
        """Sends one request frame; returns its id and the future of its answer."""
        if self.closed or self._transport is None or self._transport.is_closing():
            raise StreamError("stream closed", sent=False)
        call_id = self._next_id
        while call_id in self._calls:
            call_id = (call_id + 1) & 0xFFFFFFFF
        self._next_id = (call_id + 1) & 0xFFFFFFFF
        fut: "asyncio.Future[Tuple[int, bytes]]" = self._loop.create_future()
        self._calls[call_id] = fut
        self._write(call_id, method, target, body)
        return call_id, fut

    def cancel(self, call_id: int) -> None:
        """Tells the server to stop a call whose caller gave up. Its id stays taken
        until its answer comes."""
        if call_id in self._calls and not self.closed:
            self._write(call_id, "CANCEL", "", b"")

    def _write(self, call_id: int, method: str, target: str, body: bytes) -> None:
        """Writes a frame: the first of a turn of the loop at once, the others of
        that turn together at its end."""
        m, t = method.encode("ascii"), target.encode("utf-8")
        length = 4 + 1 + len(m) + 2 + len(t) + len(body)
        frame = b"".join((_REQUEST.pack(length, call_id, len(m)), m, _U16.pack(len(t)), t, body))
        if self._flush_pending:
            self._out.append(frame)
            return
        self._flush_pending = True
        self._loop.call_soon(self._flush)
        if self._transport is not None:
            self._transport.write(frame)

    def _flush(self) -> None:
        self._flush_pending = False
        out, self._out = self._out, []
        if out and self._transport is not None and not self._transport.is_closing():
            self._transport.write(b"".join(out))

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


def _refusal_body(headers: Dict[str, str], rest: bytes, eof: bool) -> Optional[bytes]:
    """The body of a refused upgrade once it is whole (or ``_MAX_REFUSAL`` of it),
    or None while more is to come."""
    if "content-length" in headers:
        try:
            want = min(int(headers["content-length"]), _MAX_REFUSAL)
        except ValueError:
            return rest[:_MAX_REFUSAL]
        return rest[:want] if len(rest) >= want or eof else None
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body, at = b"", 0
        while True:
            line_end = rest.find(b"\r\n", at)
            if line_end < 0:
                break
            try:
                size = int(rest[at:line_end].split(b";")[0], 16)
            except ValueError:
                return body
            if size == 0 or len(body) >= _MAX_REFUSAL:
                return body[:_MAX_REFUSAL]
            if len(rest) < line_end + 2 + size + 2:
                break
            body += rest[line_end + 2:line_end + 2 + size]
            at = line_end + 2 + size + 2
        return body if eof else None
    return rest[:_MAX_REFUSAL] if eof or len(rest) >= _MAX_REFUSAL else None


class StreamClient:
    """The stream of one client: dialled on the first call, and again on the call
    after it breaks; every call of the client's event loop shares it."""

    def __init__(self, url: str, headers: Dict[str, str]) -> None:
        parts = urlsplit(url)
        self._host = parts.hostname or ""
        self._port = parts.port or 80
        path = parts.path.rstrip("/") + "/v1/stream"
        head = [f"GET {path} HTTP/1.1", f"Host: {parts.netloc}", "Connection: Upgrade", f"Upgrade: {PROTOCOL}"]
        head += [f"{k}: {v}" for k, v in headers.items() if k.lower() not in ("host", "connection", "upgrade")]
        self._upgrade = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
        self._conn: Optional[_Connection] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._dialing: Optional["asyncio.Future[_Connection]"] = None

    async def call(self, method: str, target: str, body: bytes, timeout: float) -> Tuple[int, bytes]:
        """Sends one call and returns the status and body of its answer. Raises
        StreamRefused when the server refuses the upgrade, StreamError when the
        stream cannot carry the call (a call that may have taken effect, unless
        ``sent`` is False)."""
        for attempt in (1, 2):
            conn = await self._connection()
            try:
                call_id, fut = conn.send(method, target, body)
            except StreamError:
                if attempt == 1:
                    continue  # the connection broke before the call left: a new one
                raise
            try:
                return await asyncio.wait_for(fut, timeout)
            except asyncio.TimeoutError:
                conn.cancel(call_id)
                raise StreamError(f"no answer within {timeout:g}s") from None
            except asyncio.CancelledError:
                conn.cancel(call_id)
                raise
        raise StreamError("stream closed", sent=False)  # pragma: no cover - the loop returns or raises

    async def _connection(self) -> _Connection:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # A client used from another event loop dials a stream of its own.
            self._conn, self._dialing, self._loop = None, None, loop
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        if self._dialing is None:
            self._dialing = asyncio.ensure_future(self._dial())
        dialing = self._dialing
        try:
            # Shared by every call waiting for it: one giving up does not end it.
            return await asyncio.shield(dialing)
        finally:
            if dialing.done() and self._dialing is dialing:
                self._dialing = None

    async def _dial(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(lambda: _Connection(loop), self._host, self._port), _DIAL_TIMEOUT)
        except (OSError, asyncio.TimeoutError) as err:
            raise StreamError(f"connect to {self._host}:{self._port}: {err or type(err).__name__}",
                              sent=False) from err
        assert conn._transport is not None
        conn._transport.write(self._upgrade)
        try:
            await asyncio.wait_for(asyncio.shield(conn.upgraded), _DIAL_TIMEOUT)
        except asyncio.TimeoutError:
            conn.close()
            raise StreamError("no answer to the stream upgrade", sent=False) from None
        except StreamError as err:
            raise StreamError(str(err), sent=False) from err
        self._conn = conn
        return conn

    def close(self) -> None:
        """Closes the stream; calls in flight fail and later calls dial a new one."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
