"""The worker against a real server: results, retries, cancellation,
heartbeats and graceful shutdown."""

import asyncio
import threading
import time

import pytest

import spool
from conftest import run
from spool import AsyncClient, Backoff, JobContext, JobSpec, NoRetry, RetryAfter, Worker

TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
FAST = Backoff("fixed", base_ms=0, max_ms=0, jitter=0)


async def _until(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await pred():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


async def _active(c, job_id):
    return (await c.get(job_id)).state == "active"


def test_ack_with_result(server, queue):
    seen = {}

    async def main():
        async with AsyncClient(server.url) as c:
            w = Worker(c, [queue], concurrency=4, wait_ms=500, name="py-worker")

            @w.handle("double")
            async def double(job: JobContext):
                seen["job"] = (job.token, job.attempt, job.traceparent, spool.current_job() is job)
                await job.progress({"pct": 50})
                return {"double": job.payload * 2}

            def blocking(job: JobContext):  # runs in the thread pool
                seen["thread"] = threading.current_thread() is not threading.main_thread()
                job.progress_sync("halfway")
                return {"upper": job.payload.upper()}

            w.register("upper", blocking)
            runner = asyncio.ensure_future(w.run(handle_signals=False))
            a = await c.enqueue_and_wait("double", 21, queue=queue, traceparent=TP, timeout=10)
            b = await c.enqueue_and_wait("upper", "abc", queue=queue, timeout=10)
            w.stop()
            await runner
            assert a.state == "completed" and a.result == {"double": 42}
            assert a.progress == {"pct": 50} and a.worker == "py-worker" and a.attempt == 1
            assert b.state == "completed"
            assert b.result == {"upper": "ABC"} and b.progress == "halfway"
            token, attempt, tp, ctx_ok = seen["job"]
            assert token >= 1 and attempt == 1 and tp == TP and ctx_ok
            assert seen["thread"]
            assert w.released == 0
    run(main())


def test_retries_to_dead_with_errors(server, queue):
    async def main():
        async with AsyncClient(server.url) as c:
            w = Worker(c, [queue], wait_ms=500)

            @w.handle("boom")
            async def boom(job):
                raise ValueError(f"boom {job.attempt}")

            @w.handle("bad_input")
            def bad_input(job):
                raise NoRetry("no user")

            @w.handle("later")
            async def later(job):
                if job.attempt == 1:
                    raise RetryAfter(0.2, "come back")
                return "second"

            runner = asyncio.ensure_future(w.run(handle_signals=False))
            dead = await c.enqueue_and_wait("boom", queue=queue, max_attempts=3, backoff=FAST, timeout=10)
            nr = await c.enqueue_and_wait("bad_input", queue=queue, max_attempts=5, timeout=10)
            ra = await c.enqueue_and_wait("later", queue=queue, max_attempts=3, timeout=10)
            w.stop()
            await runner
            assert dead.state == "dead" and dead.attempt == 3
            assert [e.attempt for e in dead.errors] == [1, 2, 3]
            assert dead.errors[2].message.startswith("ValueError: boom 3")
            assert "Traceback" in dead.errors[0].message
            assert nr.state == "dead" and nr.attempt == 1
            assert nr.errors[0].message.startswith("NoRetry: no user")
            assert ra.state == "completed" and ra.result == "second" and ra.attempt == 2
            assert ra.errors[0].message.startswith("RetryAfter: come back")
    run(main())


def test_heartbeat_keeps_short_leases(server, queue):
    async def main():
        async with AsyncClient(server.url) as c:
            w = Worker(c, [queue], wait_ms=500, lease_ms=500)

            @w.handle("slow")
            async def slow(job):
                await asyncio.sleep(1.6)  # over three leases long
                return job.attempt

            runner = asyncio.ensure_future(w.run(handle_signals=False))
            jobs = await c.enqueue_many([spool.JobSpec("slow", i, queue=queue) for i in range(3)])
            done = [await c.await_job(r.id, timeout=10) for r in jobs]
            w.stop()
            await runner
            assert [j.state for j in done] == ["completed"] * 3
            assert [j.result for j in done] == [1, 1, 1]  # never handed out twice
    run(main())


def test_cancel_running_job(server, queue):
    async def main():
        cancelled = asyncio.Event()
        async with AsyncClient(server.url) as c:
            w = Worker(c, [queue], wait_ms=500, lease_ms=600)

            @w.handle("forever")
            async def forever(job):
                try:
                    await asyncio.sleep(30)
                except asyncio.CancelledError:
                    cancelled.set()
                    raise

            runner = asyncio.ensure_future(w.run(handle_signals=False))
            job_id = (await c.enqueue("forever", queue=queue)).id
            await _until(lambda: _active(c, job_id))
            assert (await c.cancel(job_id)).cancel_requested
            job = await c.await_job(job_id, timeout=5)
            assert job.state == "cancelled"
            assert cancelled.is_set()
            w.stop()
            await runner
    run(main())


def test_graceful_shutdown_releases_held_jobs(server, queue):
    async def main():
        finished = []
        # The jobs whose handlers began. A job the server shows active may
        # still be in a fetch answer the worker has not read; stopping then
        # releases it unstarted, as it should, so the test waits for the
        # handlers themselves.
        started = set()
        async with AsyncClient(server.url) as c:
            # The grace leaves the quick handler time to finish on a loaded
            # machine; the stuck ones still end long before their 30 s.
            w = Worker(c, [queue], concurrency=3, wait_ms=500, grace=2.0)

            @w.handle("quick")
            async def quick(job):
                started.add(job.id)
                await asyncio.sleep(0.2)
                finished.append(job.id)
                return "ok"

            @w.handle("stuck")
            async def stuck(job):
                started.add(job.id)
                await asyncio.sleep(30)

            @w.handle("stuck_blocking")
            def stuck_blocking(job):
                started.add(job.id)
                job.wait_cancelled(30)

            async def all_started():
                return len(started) == 3

            runner = asyncio.ensure_future(w.run(handle_signals=False))
            ids = [(await c.enqueue(k, queue=queue)).id for k in ("stuck", "stuck_blocking", "quick")]
            await _until(all_started)
            began = time.monotonic()
            w.stop()
            await runner
            assert time.monotonic() - began < 15
            assert w.released == 2
            stuck_job, blocking_job, quick_job = [await c.get(i) for i in ids]
            assert quick_job.state == "completed" and finished == [ids[2]]
            for j in (stuck_job, blocking_job):
                assert j.state == "available" and j.attempt == 0 and j.errors == []
            again = await c.fetch([queue], max=5)
            assert sorted(j.id for j in again) == sorted(ids[:2])
    run(main())


def test_sigterm_stops_the_worker(server, queue):
    import os
    import signal

    async def main():
        async with AsyncClient(server.url) as c:
            w = Worker(c, [queue], wait_ms=30000, grace=0.2)
            began = asyncio.Event()

            @w.handle("stuck")
            async def stuck(job):
                began.set()
                await asyncio.sleep(30)

            runner = asyncio.ensure_future(w.run())
            job_id = (await c.enqueue("stuck", queue=queue)).id
            # The handler itself began: a job only active on the server may
            # still be in a fetch answer, which the stop would release unread.
            await asyncio.wait_for(began.wait(), 10)
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.wait_for(runner, 5)
            assert w.released == 1
            assert (await c.get(job_id)).state == "available"
    run(main())


def test_lost_lease_cancels_handler_and_drops_its_outcome(server, queue):
    async def main():
        cancelled = asyncio.Event()
        async with AsyncClient(server.url) as c:
            # Heartbeats come only after three leases: the lease runs out first.
            w = Worker(c, [queue], wait_ms=500, lease_ms=200, heartbeat=3.0)

            @w.handle("k")
            async def k(job):
                try:
                    await asyncio.sleep(30)
                except asyncio.CancelledError:
                    cancelled.set()
                    raise

            job_id = (await c.enqueue("k", queue=queue, backoff=FAST)).id
            runner = asyncio.ensure_future(w.run(handle_signals=False))
            await _until(lambda: _active(c, job_id))
            # Another worker gets the job once the lease ran out.
            taken = []
            deadline = time.monotonic() + 5
            while not taken and time.monotonic() < deadline:
                taken = await c.fetch([queue], wait_ms=200, lease_ms=10000, worker="other")
            assert taken and taken[0].id == job_id
            # The worker's next heartbeat learns it and cancels the handler.
            await asyncio.wait_for(cancelled.wait(), 5)
            w.stop()
            await runner
            assert w.released == 0
            job = await c.get(job_id)
            assert job.state == "active" and job.worker == "other" and job.token == taken[0].token
            assert (await c.ack(job_id, taken[0].token, "theirs")).state == "completed"
    run(main())


def test_sync_client_with_worker_in_a_thread(server, queue):
    """A producer in blocking code, a worker in a thread of its own, stopped
    from another thread."""
    from spool import Client

    w = None
    ready = threading.Event()

    def serve():
        nonlocal w

        async def main():
            nonlocal w
            async with AsyncClient(server.url) as c:
                w = Worker(c, [queue], wait_ms=500)
                w.register("add", lambda job: sum(job.payload))
                ready.set()
                await w.run()  # not the main thread: no signal handlers

        run(main())

    t = threading.Thread(target=serve)
    t.start()
    try:
        assert ready.wait(5)
        with Client(server.url) as c:
            job = c.enqueue_and_wait("add", [1, 2, 3], queue=queue, timeout=10)
            assert job.state == "completed" and job.result == 6
    finally:
        w.stop()
        t.join(10)
    assert not t.is_alive()


def test_handler_enqueues_continue_the_trace_and_bad_results_fail(server, queue):
    async def main():
        async with AsyncClient(server.url) as c:
            w = Worker(c, [queue], wait_ms=500)

            @w.handle("parent")
            async def parent(job):
                return (await c.enqueue("child", queue=queue + "-children")).id

            @w.handle("unjsonable")
            async def unjsonable(job):
                return object()

            runner = asyncio.ensure_future(w.run(handle_signals=False))
            p = await c.enqueue_and_wait("parent", queue=queue, traceparent=TP, timeout=10)
            bad = await c.enqueue_and_wait("unjsonable", queue=queue, max_attempts=1, timeout=10)
            w.stop()
            await runner
            child = await c.get(p.result)
            assert child.traceparent == TP
            assert bad.state == "dead" and "not JSON" in bad.errors[0].message
    run(main())


def test_batches_of_jobs_are_acked_together(server, queue):
    async def main():
        async with AsyncClient(server.url) as c:
            calls = []
            send = c.ack_many

            async def counting(items):
                calls.append(len(items))
                return await send(items)

            c.ack_many = counting  # type: ignore[method-assign]
            w = Worker(c, [queue], concurrency=20, wait_ms=500)
            w.register("echo", lambda job: job.payload)
            jobs = await c.enqueue_many([spool.JobSpec("echo", i, queue=queue) for i in range(40)])
            runner = asyncio.ensure_future(w.run(handle_signals=False))
            done = [await c.await_job(r.id, timeout=10) for r in jobs]
            w.stop()
            await runner
            assert [j.result for j in done] == list(range(40))
            assert sum(calls) == 40 and len(calls) < 40
    run(main())


def test_a_result_over_the_limit_fails_only_its_own_ack(small_payload_server, queue):
    """Two acks share a call, and one result is over the server's limit: the
    server refuses the call naming that item; the other job is acked at once."""
    async def main():
        async with AsyncClient(small_payload_server.url) as c:
            w = Worker(c, [queue], concurrency=2, wait_ms=500)

            @w.handle("k")
            async def k(job: JobContext):
                if job.payload == "nan":
                    return {"ratio": float("nan")}
                return "x" * 2048 if job.payload == "big" else "small result"

            big = (await c.enqueue("k", "big", queue=queue)).id
            small = (await c.enqueue("k", "small", queue=queue)).id
            runner = asyncio.ensure_future(w.run(handle_signals=False))
            done = await c.await_job(small, timeout=10)
            assert done.state == "completed" and done.result == "small result" and done.attempt == 1
            assert (await c.get(big)).state == "active"  # its ack was refused, as alone
            # A result JSON cannot hold fails its own job, not the call.
            nan = (await c.enqueue("k", "nan", queue=queue, max_attempts=1)).id
            small = (await c.enqueue("k", "small", queue=queue)).id
            assert (await c.await_job(small, timeout=10)).state == "completed"
            failed = await c.await_job(nan, timeout=10)
            assert failed.state == "dead" and "not JSON" in failed.errors[0].message
            w.stop()
            await runner
    run(main())


def test_a_stale_token_in_a_batch_fails_only_its_own_job(server, queue):
    async def main():
        async with AsyncClient(server.url) as c:
            calls = []
            send = c.ack_many

            async def counting(items):
                items = list(items)
                calls.append(len(items))
                return await send(items)

            c.ack_many = counting  # type: ignore[method-assign]
            w = Worker(c, [queue], concurrency=2, wait_ms=500, heartbeat=100.0)
            started = {}
            release = asyncio.Event()

            @w.handle("k")
            async def k(job: JobContext):
                started[job.id] = job.token
                await release.wait()
                return "done by the worker"

            stale = (await c.enqueue("k", queue=queue)).id
            kept = (await c.enqueue("k", queue=queue)).id
            runner = asyncio.ensure_future(w.run(handle_signals=False))
            await _until(lambda: _true(len(started) == 2))
            # The lease of one job goes to another holder: the worker's token
            # is stale, which it learns only from its ack.
            await c.release(stale, started[stale])
            other = await c.fetch([queue], max=1)
            assert [j.id for j in other] == [stale]
            release.set()
            done = await c.await_job(kept, timeout=10)
            w.stop()
            await runner
            assert done.state == "completed" and done.result == "done by the worker"
            assert calls == [2]  # both acks in one call
            job = await c.get(stale)
            assert job.state == "active" and job.token == other[0].token and job.result is None
            assert (await c.ack(stale, other[0].token, "theirs")).state == "completed"
    run(main())


def test_calls_per_job_with_100_handlers(server, queue):
    """Handlers that finish together share their fetches, acks and fails: a
    worker that sent one call per job would make ten times the calls allowed."""
    async def main():
        async with AsyncClient(server.url) as c:
            counts = {"fetch": 0, "ack_many": 0, "fail_many": 0, "extend_many": 0, "ack": 0, "fail": 0}
            for name in counts:
                def wrap(send, name=name):
                    async def counted(*a, **kw):
                        counts[name] += 1
                        return await send(*a, **kw)
                    return counted
                setattr(c, name, wrap(getattr(c, name)))
            n = 1000
            w = Worker(c, [queue], concurrency=100, wait_ms=500)

            @w.handle("ok")
            async def ok(job: JobContext):
                return None

            @w.handle("bad")
            async def bad(job: JobContext):
                raise NoRetry("bad job")

            await c.enqueue_many([spool.JobSpec("bad" if i % 10 == 0 else "ok", queue=queue) for i in range(n)])
            runner = asyncio.ensure_future(w.run(handle_signals=False))

            async def finished():
                counts_ = (await c.queue(queue)).counts
                return counts_.get("completed", 0) == n * 9 // 10 and counts_.get("dead", 0) == n // 10
            await _until(finished, timeout=30)
            w.stop()
            await runner
            assert counts["ack"] == 0 and counts["fail"] == 0, counts
            assert sum(counts.values()) / n <= 0.25, counts
    run(main(), timeout=60)


async def _true(value):
    return value


def test_runs_in_order_and_a_failure_stops_its_run(server, queue):
    groups = {f"g{n}": [] for n in range(3)}  # each group's payloads, as their handlers end
    started = {g: [] for g in groups}  # each group's payloads, as their handlers start
    retry = Backoff("fixed", base_ms=50, max_ms=50, jitter=0)
    longest = [0]  # the most jobs of one group in one fetch answer

    async def main():
        async with AsyncClient(server.url) as c:
            await c.set_limits(queue, {"ordered": True})
            specs = [JobSpec("step", {"g": g, "i": i}, queue=queue, group=g, backoff=retry,
                             max_attempts=3)
                     for i in range(20) for g in groups]
            ids = [r.id for r in await c.enqueue_many(specs)]
            w = Worker(c, [queue], concurrency=12, wait_ms=200, runs=True)
            fetch = c.fetch

            async def counting_fetch(*args, **kwargs):
                jobs = await fetch(*args, **kwargs)
                for g in groups:
                    longest[0] = max(longest[0], sum(j.group == g for j in jobs))
                return jobs

            c.fetch = counting_fetch

            @w.handle("step")
            async def step(job: JobContext):
                g, i = job.payload["g"], job.payload["i"]
                started[g].append(i)
                await asyncio.sleep(0.001)
                if g == "g0" and i == 2 and job.attempt == 1:
                    raise ValueError("first attempt of g0's third job")
                groups[g].append(i)

            runner = asyncio.ensure_future(w.run(handle_signals=False))
            try:
                await _until(lambda: _all_done(groups), timeout=20)
            finally:
                w.stop()
                await runner
            jobs = [await c.get(i) for i in ids]
            assert [j.state for j in jobs] == ["completed"] * 60
            assert sum(j.attempt for j in jobs) == 61
    run(main(), timeout=40)
    for g, done in groups.items():
        assert done == list(range(20)), g
    # The failure stopped g0's run: its later jobs were not run before the
    # third ran again.
    assert started["g0"] == [0, 1, 2] + list(range(2, 20))
    assert started["g1"] == started["g2"] == list(range(20))
    assert longest[0] > 1


def test_runs_with_max_groups_fetch_one_groups_run(server, queue):
    groups = {f"g{n}": [] for n in range(3)}  # each group's payloads, as their handlers end
    answers = []  # the groups of each non-empty fetch answer

    async def main():
        async with AsyncClient(server.url) as c:
            await c.set_limits(queue, {"ordered": True})
            await c.enqueue_many([JobSpec("step", {"g": g, "i": i}, queue=queue, group=g)
                                  for i in range(3) for g in groups])
            w = Worker(c, [queue], concurrency=9, wait_ms=200, runs=True, max_groups=1)
            fetch = c.fetch

            async def recording_fetch(*args, **kwargs):
                jobs = await fetch(*args, **kwargs)
                if jobs:
                    answers.append({j.group for j in jobs})
                return jobs

            c.fetch = recording_fetch

            @w.handle("step")
            async def step(job: JobContext):
                groups[job.payload["g"]].append(job.payload["i"])

            runner = asyncio.ensure_future(w.run(handle_signals=False))
            try:
                await _until(lambda: _all_done(groups, 3), timeout=20)
            finally:
                w.stop()
                await runner
    run(main(), timeout=40)
    assert all(done == [0, 1, 2] for done in groups.values()), groups
    assert answers and all(len(gs) == 1 for gs in answers), answers


async def _all_done(groups, n=20):
    return all(len(done) >= n for done in groups.values())


@pytest.mark.parametrize("ordered, released", [(True, 1), (False, 4)])
def test_runs_stop_hands_back_the_rest_of_a_run(server, queue, ordered, released):
    # An ordered queue takes back the rest of a run with the next job the
    # worker releases; another queue takes back only what it releases.
    async def main():
        async with AsyncClient(server.url) as c:
            if ordered:
                await c.set_limits(queue, {"ordered": True})
            ids = [r.id for r in await c.enqueue_many(
                [JobSpec("step", i, queue=queue, group="g", lease_ms=600_000) for i in range(5)])]
            w = Worker(c, [queue], concurrency=10, wait_ms=200, runs=True)
            first_runs = asyncio.Event()
            go_on = asyncio.Event()
            ran = []

            @w.handle("step")
            async def step(job: JobContext):
                ran.append(job.payload)
                first_runs.set()
                await go_on.wait()

            runner = asyncio.ensure_future(w.run(handle_signals=False))
            await asyncio.wait_for(first_runs.wait(), 10)
            w.stop()  # the first job finishes within the grace; the rest wait
            go_on.set()
            await runner
            assert ran == [0]
            assert w.released == released
            jobs = [await c.get(i) for i in ids]
            assert [j.state for j in jobs] == ["completed"] + ["available"] * 4
            assert [j.attempt for j in jobs] == [1, 0, 0, 0, 0]
    run(main())


def test_runs_failure_releases_the_rest_of_a_run_of_an_unordered_queue(server, queue):
    retry = Backoff("fixed", base_ms=10, max_ms=10, jitter=0)

    async def main():
        async with AsyncClient(server.url) as c:
            # Leases of 10 minutes: only a release makes the jobs available
            # again within the test.
            ids = [r.id for r in await c.enqueue_many(
                [JobSpec("step", i, queue=queue, group="g", lease_ms=600_000, backoff=retry,
                         max_attempts=3) for i in range(5)])]
            w = Worker(c, [queue], concurrency=5, wait_ms=200, runs=True)
            release_many = c.release_many
            released = asyncio.Event()

            async def noting_release_many(items):
                results = await release_many(items)
                released.set()
                return results

            c.release_many = noting_release_many
            done = []

            @w.handle("step")
            async def step(job: JobContext):
                if job.payload == 1 and job.attempt == 1:
                    # The queue paused, the worker fetches nothing more: the
                    # released jobs stay available for the test to see.
                    await c.pause(queue)
                    raise ValueError("first attempt of the second job")
                done.append(job.payload)

            runner = asyncio.ensure_future(w.run(handle_signals=False))
            try:
                await asyncio.wait_for(released.wait(), 20)
                jobs = [await c.get(i) for i in ids]
                assert [j.state for j in jobs[2:]] == ["available"] * 3
                assert [len(j.errors) for j in jobs[2:]] == [0] * 3
                await c.resume(queue)
                await _until(lambda: _true(len(done) == 5), timeout=20)
            finally:
                w.stop()
                await runner
            assert sorted(done) == list(range(5))
            jobs = [await c.get(i) for i in ids]
            assert [j.state for j in jobs] == ["completed"] * 5
            assert [len(j.errors) for j in jobs] == [0, 1, 0, 0, 0]
    run(main(), timeout=40)
