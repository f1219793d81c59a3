"""Retries, timeouts and headers, against a fake transport (no server)."""

import json

import httpx
import pytest

import spool
from spool import Client


def _client(handler, **kw):
    return Client("http://spool.test", http=httpx.Client(transport=httpx.MockTransport(handler)),
                  **kw)


JOB = {"id": "j1", "queue": "q", "kind": "k", "state": "available", "priority": 0,
       "run_at": "2026-11-22T15:04:05.123456789Z", "attempt": 0, "max_attempts": 25,
       "backoff": {"type": "exponential", "base_ms": 1000, "max_ms": 3600000, "jitter": 0.2},
       "lease_ms": 30000, "durability": "full", "created_at": "2026-11-22T15:04:05Z",
       "some_new_field": 1}


def _unavailable():
    return httpx.Response(503, json={"error": {"code": "unavailable", "message": "shutting down"}})


def test_idempotent_calls_are_sent_again():
    calls = []

    def handler(req):
        calls.append(req)
        if len(calls) < 3:
            return _unavailable()
        return httpx.Response(200, json=JOB)

    with _client(handler, token="s3cr3t-s3cr3t-s3cr3t") as c:
        job = c.get("j1")
    assert len(calls) == 3 and job.id == "j1"
    assert calls[0].headers["authorization"] == "Bearer s3cr3t-s3cr3t-s3cr3t"
    assert job.run_at is not None and job.run_at.microsecond == 123456
    assert job.extra == {"some_new_field": 1}


def test_enqueue_without_id_is_never_sent_again():
    calls = []

    def handler(req):
        calls.append(json.loads(req.content))
        return _unavailable()

    with _client(handler) as c:
        with pytest.raises(spool.Unavailable) as e:
            c.enqueue("k")
        assert e.value.status == 503 and len(calls) == 1
        calls.clear()
        with pytest.raises(spool.Unavailable):
            c.enqueue("k", id="fixed")
        assert len(calls) == 4  # the first and three retries
        assert calls[0] == {"kind": "k", "id": "fixed"}


def test_transport_errors_and_timeouts():
    calls = []

    def handler(req):
        calls.append(req)
        raise httpx.ReadTimeout("timed out", request=req)

    with _client(handler, retries=2, timeout=0.5) as c:
        with pytest.raises(spool.TransportError):
            c.get("j1")
        assert len(calls) == 3
        calls.clear()
        with pytest.raises(spool.TransportError):
            c.ack("j1", 1)
        assert len(calls) == 1


def test_long_polls_get_their_wait_on_top_of_the_timeout():
    seen = {}

    def handler(req):
        seen["timeout"] = req.extensions["timeout"]["read"]
        return httpx.Response(200, json={"jobs": []})

    with _client(handler, timeout=5) as c:
        assert c.fetch(["q"], wait_ms=20000) == []
    assert seen["timeout"] == 25


def test_an_answer_that_is_not_a_spool_error():
    with _client(lambda req: httpx.Response(502, text="bad gateway"), retries=0) as c:
        with pytest.raises(spool.SpoolError) as e:
            c.ack("j1", 1)
    assert e.value.status == 502
