"""The asyncio client's stream transport (spool-stream/1) against real servers,
and its fallback to HTTP against a server that does not serve it."""

import asyncio

import httpx
import pytest

import spool
from conftest import ADMIN_SECRET, run
from spool import AsyncClient


def _metric(url: str, series: str) -> float:
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


UPGRADES = 'spool_http_requests_total{code="101",route="GET /v1/stream"}'


async def _upgrades_reach(url: str, want: float) -> float:
    """The server counts a stream once it has closed: waits (a few seconds at
    most) for the count to reach ``want`` and returns it."""
    for _ in range(100):
        got = _metric(url, UPGRADES)
        if got >= want:
            return got
        await asyncio.sleep(0.05)
    return _metric(url, UPGRADES)


def test_calls_go_over_one_stream(server, queue):
    async def main():
        before = _metric(server.url, UPGRADES)
        async with AsyncClient(server.url) as c:
            ids = await asyncio.gather(*(c.enqueue("k", i, queue=queue) for i in range(20)))
            jobs = await c.fetch([queue], max=20)
            assert sorted(j.payload for j in jobs) == list(range(20))
            results = await c.ack_many([{"id": j.id, "token": j.token} for j in jobs])
            assert all(r.error is None and r.state == "completed" for r in results)
            with pytest.raises(spool.NotFound) as e:
                await c.get("no-such-job")
            assert e.value.status == 404
            assert len({r.id for r in ids}) == 20
        assert await _upgrades_reach(server.url, before + 1) == before + 1
    run(main())


def test_a_cancelled_long_poll_hands_back_what_it_claimed(server, queue):
    async def main():
        async with AsyncClient(server.url) as c, AsyncClient(server.url) as other:
            poll = asyncio.ensure_future(c.fetch([queue], wait_ms=20000))
            await asyncio.sleep(0.2)
            poll.cancel()
            with pytest.raises(asyncio.CancelledError):
                await poll
            job_id = (await other.enqueue("k", queue=queue)).id
            jobs = await other.fetch([queue], wait_ms=5000)
            assert [j.id for j in jobs] == [job_id]
            assert (await c.get(job_id)).state == "active"  # the stream still serves c
    run(main())


def test_a_broken_stream_is_dialled_again(server, queue):
    async def main():
        async with AsyncClient(server.url) as c:
            await c.enqueue("k", queue=queue)
            c._stream.close()  # as when the connection drops
            assert (await c.queue(queue)).counts.get("available") == 1
    run(main())


def test_an_upgrade_refused_for_one_call_sends_that_call_over_http(auth_server, queue):
    async def main():
        async with AsyncClient(auth_server.url, token="") as c:
            with pytest.raises(spool.Unauthorized) as e:
                await c.get("x")
            assert e.value.status == 401
            assert c._stream is not None  # tried again on the next call
        async with AsyncClient(auth_server.url, token=ADMIN_SECRET) as c:
            job_id = (await c.enqueue("k", queue=queue)).id
            assert (await c.get(job_id)).state == "available"
    run(main())


def test_a_server_without_the_stream_gets_http_for_good():
    """A server (or proxy) that does not know the upgrade answers it 404: the
    client sends that call and every later one over HTTP, dialling no more."""
    async def main():
        seen = []

        async def serve(reader, writer):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                line = head.split(b"\r\n", 1)[0].decode()
                seen.append(line)
                length = 0
                for h in head.split(b"\r\n")[1:]:
                    if h.lower().startswith(b"content-length:"):
                        length = int(h.split(b":")[1])
                await reader.readexactly(length)
                if line.startswith("GET /v1/stream"):
                    body = b'{"error":{"code":"not_found","message":"no route"}}'
                    status = b"404 Not Found"
                else:
                    body = b'{"name":"q","paused":false,"durability":"full","counts":{"available":3}}'
                    status = b"200 OK"
                writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(body)).encode() + b"\r\n\r\n" + body)
                await writer.drain()

        srv = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        try:
            async with AsyncClient(f"http://127.0.0.1:{port}") as c:
                assert (await c.queue("q")).counts == {"available": 3}
                assert (await c.queue("q")).counts == {"available": 3}
        finally:
            srv.close()
        assert seen == ["GET /v1/stream HTTP/1.1", "GET /v1/queues/q HTTP/1.1", "GET /v1/queues/q HTTP/1.1"]
    run(main())


def test_no_stream_with_a_given_http_client_or_a_proxy(server, queue, monkeypatch):
    async def main():
        sent = []

        async def send(request):
            sent.append(request.url.path)
            return httpx.Response(200, json={"id": "j1", "state": "available", "duplicate": False})

        async with AsyncClient(server.url, http=httpx.AsyncClient(transport=httpx.MockTransport(send))) as c:
            assert (await c.enqueue("k", queue=queue)).id == "j1"
        assert sent == ["/v1/jobs"]
        monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        for url in (server.url, server.url.replace("127.0.0.1", "localhost"), "https://spool.example"):
            proxied = AsyncClient(url)
            assert proxied._stream is None, url
            await proxied.aclose()
    run(main())
