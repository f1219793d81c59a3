"""The clients against a real server: jobs, queues, errors, auth."""

import time

import pytest

import spool
from conftest import ADMIN_SECRET, READER_SECRET, run
from spool import AsyncClient, Backoff, Client, JobSpec


def test_enqueue_every_option_and_get(server, queue):
    with Client(server.url) as c:
        tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        res = c.enqueue("send", {"user": 42}, queue=queue, id=f"{queue}-1", priority=7,
                        delay_ms=60000, max_attempts=3,
                        backoff=Backoff("fixed", base_ms=10, max_ms=10, jitter=0),
                        lease_ms=5000, unique_key="u-42", unique_for_ms=1000, tags=["a", "b"],
                        group="tenant-1", durability="process", traceparent=tp)
        assert res.id == f"{queue}-1" and res.state == "scheduled" and not res.duplicate
        job = c.get(res.id)
        assert (job.queue, job.kind, job.payload, job.priority) == (queue, "send", {"user": 42}, 7)
        assert job.max_attempts == 3 and job.lease_ms == 5000 and job.durability == "process"
        assert job.backoff == Backoff("fixed", 10, 10, 0)
        assert job.tags == ["a", "b"] and job.group == "tenant-1" and job.traceparent == tp
        assert job.unique_key == "u-42" and job.unique_for_ms == 1000
        assert job.run_at is not None and job.created_at is not None and job.extra == {}
        # The same id again is a duplicate (and may be retried safely).
        again = c.enqueue(JobSpec("send", {"user": 42}, queue=queue, id=f"{queue}-1"))
        assert again.duplicate and again.id == res.id
        # run_at, as a datetime.
        from datetime import datetime, timedelta, timezone
        later = c.enqueue("send", queue=queue, run_at=datetime.now(timezone.utc) + timedelta(hours=1))
        assert c.get(later.id).state == "scheduled"


def test_batch_list_cancel_retry_delete(server, queue):
    with Client(server.url) as c:
        results = c.enqueue_many([JobSpec("k", i, queue=queue) for i in range(5)])
        assert [r.state for r in results] == ["available"] * 5
        page = c.list_jobs(queue=queue, limit=3)
        assert [j.payload for j in page.jobs] == [0, 1, 2] and page.next_cursor
        rest = c.list_jobs(queue=queue, cursor=page.next_cursor)
        assert [j.payload for j in rest.jobs] == [3, 4] and rest.next_cursor is None
        first = results[0].id
        assert c.cancel(first).state == "cancelled"
        assert c.retry(first).state == "available"
        assert c.cancel(first).state == "cancelled"
        c.delete(first)
        with pytest.raises(spool.NotFound) as e:
            c.get(first)
        assert e.value.status == 404 and e.value.code == "not_found"


def test_queue_admin(server, queue):
    with Client(server.url) as c:
        c.enqueue_many([JobSpec("k", i, queue=queue) for i in range(3)])
        assert c.pause(queue).paused
        assert c.fetch([queue], max=3) == []
        assert not c.resume(queue).paused
        q = c.set_limits(queue, {"max_active": 2, "group_max_active": 1})
        assert q.limits == {"max_active": 2, "group_max_active": 1}
        assert c.clear_limits(queue).limits is None
        q = c.set_settings(queue, {"max_wait_ms": 60000, "default_max_attempts": 4})
        assert q.settings == {"max_wait_ms": 60000, "default_max_attempts": 4}
        assert c.clear_settings(queue).settings is None
        assert c.set_durability(queue, "process").durability == "process"
        assert c.queue(queue).counts["available"] == 3
        assert queue in [q.name for q in c.queues()]
        assert c.purge(queue) == 3
        assert c.queue(queue).counts["available"] == 0


def test_update_settings_and_limits_keep_the_rest(server, queue):
    with Client(server.url) as c:
        c.set_settings(queue, {"dead_letter_queue": queue + "-dlq", "max_wait_ms": 600000})
        q = c.update_settings(queue, {"default_lease_ms": 300000})
        assert q.settings == {"dead_letter_queue": queue + "-dlq", "max_wait_ms": 600000,
                              "default_lease_ms": 300000}
        q = c.update_settings(queue, {"max_wait_ms": None, "default_max_attempts": 4})
        assert q.settings == {"dead_letter_queue": queue + "-dlq", "default_lease_ms": 300000,
                              "default_max_attempts": 4}
        with pytest.raises(spool.InvalidArgument) as e:
            c.update_settings(queue, {"dead_letter_queue": queue, "default_lease_ms": None})
        assert e.value.field == "dead_letter_queue"
        assert c.queue(queue).settings == q.settings
        c.set_limits(queue, {"rate": {"limit": 50, "period_ms": 1000}, "max_active": 20})
        q = c.update_limits(queue, {"rate": {"limit": 100}, "max_active": None})
        assert q.limits == {"rate": {"limit": 100, "period_ms": 1000}}


def test_update_settings_async(server, queue):
    async def main():
        async with AsyncClient(server.url) as c:
            await c.set_settings(queue, {"max_wait_ms": 60000})
            q = await c.update_settings(queue, {"default_delay_ms": 1000})
            assert q.settings == {"max_wait_ms": 60000, "default_delay_ms": 1000}
            q = await c.update_limits(queue, {"max_active": 3})
            assert q.limits == {"max_active": 3} and q.settings == {"max_wait_ms": 60000,
                                                                     "default_delay_ms": 1000}
    run(main())


def test_lease_expiry_and_stale_token(server, queue):
    with Client(server.url) as c:
        job_id = c.enqueue("k", queue=queue, backoff={"type": "fixed", "base_ms": 0, "max_ms": 0}).id
        [first] = c.fetch([queue], lease_ms=300, worker="w1")
        assert first.id == job_id and first.attempt == 1 and first.worker == "w1"
        # The lease runs out; the job goes out again with a newer token.
        deadline = time.monotonic() + 10
        second = []
        while not second and time.monotonic() < deadline:
            second = c.fetch([queue], wait_ms=1000, lease_ms=5000, worker="w2")
        assert second, "the expired job was not handed out again"
        assert second[0].token > first.token and second[0].attempt == 2
        with pytest.raises(spool.LeaseLost) as e:
            c.ack(job_id, first.token, {"late": True})
        assert e.value.status == 409
        with pytest.raises(spool.LeaseLost):
            c.extend(job_id, first.token)
        assert c.ack(job_id, second[0].token, {"ok": 1}).state == "completed"
        assert c.get(job_id).result == {"ok": 1}


def test_fetch_ack_fail_by_hand_async(server, queue):
    async def main():
        async with AsyncClient(server.url) as c:
            ids = [r.id for r in await c.enqueue_many(
                [JobSpec("k", i, queue=queue, max_attempts=1) for i in range(3)])]
            jobs = await c.fetch([queue], max=3, wait_ms=1000)
            assert sorted(j.id for j in jobs) == sorted(ids)
            ext = await c.extend_many([{"id": j.id, "token": j.token} for j in jobs])
            assert all(r.error is None and r.lease_expires_at for r in ext)
            await c.progress(jobs[0].id, jobs[0].token, {"pct": 50})
            acked = await c.ack_many([{"id": jobs[0].id, "token": jobs[0].token, "result": 1},
                                      {"id": jobs[1].id, "token": jobs[1].token + 100}])
            assert acked[0].state == "completed"
            assert isinstance(acked[1].error, spool.LeaseLost)
            failed = await c.fail(jobs[1].id, jobs[1].token, "bad", no_retry=True)
            assert failed.state == "dead"
            released = await c.release_many([{"id": jobs[2].id, "token": jobs[2].token}])
            assert released[0].state == "available"
            done = await c.get(jobs[0].id)
            assert done.progress == {"pct": 50} and done.result == 1
            dead = await c.get(jobs[1].id)
            assert dead.errors[0].message == "bad"
            assert (await c.get(jobs[2].id)).attempt == 0
    run(main())


def test_invalid_argument_names_the_field(server, queue):
    with Client(server.url) as c:
        with pytest.raises(spool.InvalidArgument) as e:
            c.enqueue("k", queue=queue, priority=5000)
        assert e.value.field == "priority" and e.value.status == 400
        with pytest.raises(spool.InvalidArgument) as e:
            c.enqueue_many([JobSpec("k", queue=queue), JobSpec("k", queue=queue, max_attempts=0)])
        assert e.value.field == "jobs[1].max_attempts"
        with pytest.raises(spool.InvalidState):
            done = c.enqueue("k", queue=queue)
            [j] = c.fetch([queue])
            c.ack(j.id, j.token)
            c.cancel(done.id)
        with pytest.raises(spool.IDTaken) as e:
            c.enqueue("k", queue=queue, id=f"{queue}-x")
            c.enqueue("k", queue=queue + "-other", id=f"{queue}-x")
        assert e.value.field == "id"


def test_transport_error_when_no_server():
    with Client("http://127.0.0.1:9", retries=1, timeout=2) as c:
        with pytest.raises(spool.TransportError):
            c.get("x")


def test_auth(auth_server, queue):
    with Client(auth_server.url, token="") as c:
        with pytest.raises(spool.Unauthorized) as e:
            c.get("x")
        assert e.value.status == 401
    with Client(auth_server.url, token=READER_SECRET) as c:
        with pytest.raises(spool.Forbidden) as e:
            c.enqueue("k", queue=queue)
        assert e.value.status == 403
        assert c.list_jobs(queue=queue).jobs == []
    with Client(auth_server.url, token=ADMIN_SECRET) as c:
        job_id = c.enqueue("k", queue=queue).id
        assert c.get(job_id).state == "available"


def test_schedules(server, queue):
    name = queue + "-nightly"
    with Client(server.url) as c:
        sch = c.put_schedule(name, JobSpec("report", {"p": "daily"}, queue=queue),
                             cron="0 3 * * *", timezone="Europe/Berlin", misfire="catch_up",
                             max_catch_up=10)
        assert sch["name"] == name and sch["job"]["kind"] == "report"
        assert name in [s["name"] for s in c.schedules()]
        assert c.pause_schedule(name)["paused"]
        assert not c.resume_schedule(name)["paused"]
        fired = c.trigger_schedule(name)
        job = c.get(fired["job"]["id"])
        assert job.queue == queue and job.payload == {"p": "daily"}
        with pytest.raises(spool.InvalidArgument) as e:
            c.put_schedule(name, {"queue": queue, "kind": "report"})
        assert e.value.field == "cron"
        c.delete_schedule(name)
        with pytest.raises(spool.NotFound):
            c.schedule(name)


def test_consumer_groups(server, queue):
    with Client(server.url) as c:
        first = c.enqueue("event", 1, queue=queue).id
        g = c.put_consumer_group(queue, "audit", start="beginning")
        assert g["name"] == "audit"
        c.enqueue("event", 2, queue=queue)
        got = c.fetch([queue], max=10, consumer_group="audit")
        assert sorted(j.payload for j in got) == [1, 2]
        assert all(j.consumer_group == "audit" for j in got)
        assert c.get(first).state == "available"  # the queue's own job is untouched
        assert [x["name"] for x in c.consumer_groups(queue)] == ["audit"]
        assert c.consumer_group(queue, "audit")["name"] == "audit"
        c.seek_consumer_group(queue, "audit", start="new")
        c.delete_consumer_group(queue, "audit")
        with pytest.raises(spool.NotFound):
            c.consumer_group(queue, "audit")


def test_the_server_url_comes_from_spool_server_first(server, queue, monkeypatch):
    # SPOOL_SERVER, which the CLI reads, wins over SPOOL_URL.
    monkeypatch.setenv("SPOOL_SERVER", server.url)
    monkeypatch.setenv("SPOOL_URL", "http://127.0.0.1:1")
    with Client() as c:
        assert c.url == server.url
        assert c.enqueue("k", queue=queue).state == "available"
    monkeypatch.delenv("SPOOL_SERVER")
    with Client() as c:
        assert c.url == "http://127.0.0.1:1"


def test_fetch_runs_of_an_ordered_group(server, queue):
    with Client(server.url) as c:
        plain, runs = queue + "-one", queue + "-run"
        for q in (plain, runs):
            c.set_limits(q, {"ordered": True})
            c.enqueue_many([JobSpec("k", i, queue=q, group="g") for i in range(5)])
        # Without runs an ordered group hands out one job at a time.
        assert [j.payload for j in c.fetch([plain], max=10)] == [0]
        # With runs the free group hands out all of its jobs, in enqueue order.
        jobs = c.fetch([runs], max=10, runs=True)
        assert [j.payload for j in jobs] == [0, 1, 2, 3, 4]
        assert len({j.token for j in jobs}) == 5


def test_fetch_max_groups_takes_one_groups_run(server, queue):
    with Client(server.url) as c:
        c.set_limits(queue, {"ordered": True})
        specs = [JobSpec("k", i, queue=queue, group=g) for i in range(3) for g in ("g0", "g1", "g2")]
        ids = {}
        for spec, r in zip(specs, c.enqueue_many(specs)):
            ids.setdefault(spec.group, []).append(r.id)
        # With max_groups=1 the fetch takes one group's run, whichever group.
        jobs = c.fetch([queue], max=10, runs=True, max_groups=1)
        assert jobs and [j.id for j in jobs] == ids[jobs[0].group]
        for bad in (0, 1001):
            with pytest.raises(spool.InvalidArgument) as e:
                c.fetch([queue], max=10, runs=True, max_groups=bad)
            assert e.value.field == "max_groups"
