"""An asyncio worker: fetches jobs in batches with long polling, runs their
handlers concurrently, keeps their leases alive with one heartbeat loop, and
acks or fails each job with its handler's outcome.

Handlers are registered by kind and take a :class:`JobContext`. An ``async def``
handler runs as an asyncio task; a plain function runs in a thread pool so
that blocking code does not stall the worker.

Handlers that finish together share their calls: an ack or fail waits at most
:data:`SETTLE_DELAY` (2 ms) for others to join it in one batch call, and none
when no other handler runs or the worker stops; each job still gets its own
answer, so a stale token fails only its own job. A handler's slot frees when it
returns, and a fetch asks for every free slot, waiting up to ``SETTLE_DELAY``
for half of them to be free while handlers run. A job stays the worker's, its
lease extended, until its outcome is answered (a worker that dies before then
leaves it to be handed out again when its lease ends); at most four times
``concurrency`` jobs are held at once, so that acks waiting for the disk do
not keep the next fetch from filling the slots.

A worker made with ``runs=True`` fetches runs (see :meth:`Client.fetch`): the
jobs of one queue and group in one fetch answer run one after another, in the
order received, in one task; a job of a run waiting its turn holds a slot and
its lease is extended. A run goes on after a job that is acked, and stops at
one that fails (the server sends the rest of a run back after any failure, a
release or a lost lease) or whose outcome went unrecorded, or once the worker
stops: the worker drops the rest of the run unrun and hands them back in one
release call. On an ordered queue the server has put them back already and
answers ``lease_lost``, which the worker ignores; on a queue that is not
ordered the release makes them available again at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import json
import logging
import os
import re
import signal
import socket
import threading
import time
import traceback
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence, Set, Union

from .client import MAX_WAIT_MS, AsyncClient
from .errors import (
    BatchTooLarge,
    Forbidden,
    InternalError,
    StorageFull,
    TransportError,
    Unavailable,
    InvalidArgument,
    InvalidJSON,
    LeaseLost,
    NoRetry,
    NotFound,
    PayloadTooLarge,
    RetryAfter,
    SpoolError,
    Unauthorized,
)
from ._context import current as _current
from .models import ItemResult, Job

__all__ = ["JobContext", "Worker", "current_job", "SETTLE_DELAY"]

log = logging.getLogger("spool.worker")

Handler = Callable[["JobContext"], Union[Any, Awaitable[Any]]]


# The most of an error's text the server keeps.
_MAX_ERROR = 64 * 1024

#: The most, in seconds, a worker holds a finished job's ack or fail for the
#: outcomes of other handlers to share its call, and a fetch for more slots to
#: free. None is held when no other handler runs, nor once the worker stops.
SETTLE_DELAY = 0.002
# The most items of one ack or fail call, and the most bytes of results and
# errors gathered for one, well under the server's limits.
_MAX_SETTLE_ITEMS = 1000
_MAX_SETTLE_BYTES = 4 << 20
# The item a batch call's refusal names, as in "items[3].result".
_ITEM_FIELD = re.compile(r"^items\[(\d+)\]\.?(.*)$")


def current_job() -> Optional["JobContext"]:
    """The :class:`JobContext` of the handler running in this context, if any."""
    return _current.get()


class JobContext:
    """What a handler gets: the leased job and ways to talk about it.

    Attributes:
        job: the :class:`~spool.models.Job` as fetched (active, with its lease).
    """

    __slots__ = ("job", "_worker", "_loop", "_cancelled", "_event")

    # Guards the making of a context's event, which few handlers wait on.
    _event_lock = threading.Lock()

    def __init__(self, worker: "Worker", job: Job, loop: asyncio.AbstractEventLoop) -> None:
        self.job = job
        self._worker = worker
        self._loop = loop
        self._cancelled = False
        self._event: Optional[threading.Event] = None

    def _cancel(self) -> None:
        self._cancelled = True
        with JobContext._event_lock:
            event = self._event
        if event is not None:
            event.set()

    @property
    def id(self) -> str:
        return self.job.id

    @property
    def kind(self) -> str:
        return self.job.kind

    @property
    def queue(self) -> str:
        return self.job.queue

    @property
    def payload(self) -> Any:
        return self.job.payload

    @property
    def token(self) -> int:
        """The fencing token of this lease: an idempotency key for downstream writes."""
        assert self.job.lease is not None
        return self.job.lease.token

    @property
    def attempt(self) -> int:
        """Which hand-out this is: 1 for the first."""
        return self.job.attempt

    @property
    def traceparent(self) -> Optional[str]:
        """The W3C traceparent the job was enqueued with, if any."""
        return self.job.traceparent

    @property
    def cancelled(self) -> bool:
        """True once the job's cancel was requested, its lease was lost, or the
        worker gave up on it at shutdown. Blocking handlers should poll it (or
        :meth:`wait_cancelled`) and return early; async handlers are cancelled."""
        return self._cancelled

    def wait_cancelled(self, timeout: Optional[float] = None) -> bool:
        """Blocks (in a thread handler) until cancelled or ``timeout`` passes."""
        with JobContext._event_lock:
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        if self._cancelled:
            event.set()
        return event.wait(timeout)

    async def progress(self, value: Any) -> None:
        """Records a progress report (any JSON value) for the job."""
        await self._worker.client.progress(self.job.id, self.token, value)

    def progress_sync(self, value: Any) -> None:
        """:meth:`progress` for blocking handlers running in the thread pool."""
        fut = asyncio.run_coroutine_threadsafe(self.progress(value), self._loop)
        fut.result()


class _Entry:
    __slots__ = ("job", "ctx", "task", "lease_ms", "next_extend", "reason", "finishing", "running",
                 "arrived")

    def __init__(self, job: Job, ctx: JobContext, lease_ms: int) -> None:
        self.job = job
        self.ctx = ctx
        self.task: Optional["asyncio.Task[bool]"] = None
        self.lease_ms = lease_ms
        self.next_extend = 0.0
        self.reason: Optional[str] = None  # why the worker cancelled it
        self.finishing = False  # its outcome is being sent: no more cancels
        self.running = True  # its handler holds a slot
        self.arrived = False  # its outcome reached the settler

    def cancel(self, reason: str) -> None:
        if self.finishing:
            return
        if self.reason is None:
            self.reason = reason
        self.ctx._cancel()
        if self.task is not None and not self.task.done():
            self.task.cancel()


class _Settler:
    """Gathers the acks and fails of jobs that finish together and sends each
    kind in one batch call (``POST /v1/jobs/ack``, ``POST /v1/jobs/fail``).

    Each outcome's future gets its own item's answer or error, as the single
    call would give it: the server applies a batch's items one by one, so a
    stale token fails only its own job, and a call refused as a whole for one
    item (a result over the limit) answers that item and sends the others
    again. An outcome waits at most ``SETTLE_DELAY``, less when ``max_items``
    wait, no other outcome is on its way (``coming``), or the worker stops.
    """

    def __init__(self, client: AsyncClient, max_items: int) -> None:
        self._client = client
        self._max = max_items
        self._acks: List[Any] = []  # (item, future) pairs
        self._fails: List[Any] = []
        self._bytes = 0
        self._timer: Optional[asyncio.TimerHandle] = None
        self._sends: Set["asyncio.Future[None]"] = set()
        #: Outcomes on their way: of jobs started, not yet submitted.
        self.coming = 0

    def expect(self, n: int) -> None:
        """Counts ``n`` more outcomes on their way (fewer when negative)."""
        self.coming += n
        if self.coming <= 0 and (self._acks or self._fails):
            self.flush()

    def submit(self, fail: bool, item: Dict[str, Any], size: int, arrived: bool,
               stopping: bool) -> "asyncio.Future[ItemResult]":
        """Queues one ack (or fail) item; ``arrived`` says it is the first outcome of
        its job, one ``expect`` counted. Returns the future of its answer."""
        loop = asyncio.get_running_loop()
        fut: "asyncio.Future[ItemResult]" = loop.create_future()
        if arrived:
            self.coming -= 1
        waiting = self._fails if fail else self._acks
        waiting.append((item, fut))
        self._bytes += size
        if (stopping or self.coming <= 0 or len(waiting) >= self._max
                or self._bytes >= _MAX_SETTLE_BYTES):
            self.flush()
        elif self._timer is None:
            self._timer = loop.call_later(SETTLE_DELAY, self.flush)
        return fut

    def flush(self) -> None:
        """Sends what waits."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for waiting, send in ((self._acks, self._client.ack_many), (self._fails, self._client.fail_many)):
            if waiting:
                task = asyncio.ensure_future(self._send(send, list(waiting)))
                self._sends.add(task)
                task.add_done_callback(self._sends.discard)
        self._acks.clear()
        self._fails.clear()
        self._bytes = 0

    async def _send(self, send: Callable[[List[Dict[str, Any]]], Awaitable[List[ItemResult]]],
                    batch: List[Any]) -> None:
        while batch:
            try:
                results = await send([item for item, _ in batch])
            except SpoolError as err:
                i = _named_item(err, len(batch))
                if i is not None:
                    _settle(batch[i][1], error=_single_error(err))
                    del batch[i]
                    continue
                if len(batch) > 1 and isinstance(err, (BatchTooLarge, PayloadTooLarge)):
                    half = len(batch) // 2
                    await self._send(send, batch[:half])
                    await self._send(send, batch[half:])
                    return
                for _, fut in batch:
                    _settle(fut, error=err)
                return
            except Exception as err:  # the call failed: every item did
                for _, fut in batch:
                    _settle(fut, error=err)
                return
            for (_, fut), r in zip(batch, results):
                if r.error is not None:
                    _settle(fut, error=r.error)
                else:
                    _settle(fut, result=r)
            return


def _settle(fut: "asyncio.Future[ItemResult]", result: Optional[ItemResult] = None,
            error: Optional[BaseException] = None) -> None:
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)  # type: ignore[arg-type]


def _named_item(err: SpoolError, n: int) -> Optional[int]:
    """The index of the item of a batch of ``n`` that a refusal of the whole call
    names in its field, if it names one."""
    m = _ITEM_FIELD.match(err.field or "")
    if m is None:
        return None
    i = int(m.group(1))
    return i if 0 <= i < n else None


def _single_error(err: SpoolError) -> SpoolError:
    """``err``, a refusal naming a batch item, as the single call would give it:
    the field without its ``items[i].`` prefix."""
    m = _ITEM_FIELD.match(err.field or "")
    field = m.group(2) if m else err.field
    return type(err)(err.message, code=err.code, field=field or None, status=err.status)


# The states of an acked job: the rest of its run goes on. After a failure
# the server sends the rest of a run back.
_ACKED = frozenset(("completed", "cancelled"))

# Errors retrying a fetch does not fix.
_PERMANENT = (Unauthorized, Forbidden, InvalidArgument, InvalidJSON, NotFound)


class Worker:
    """Runs handlers for the jobs of some queues.

    Handlers that finish together share their calls (see the module's
    documentation and :data:`SETTLE_DELAY`).

    Args:
        client: the :class:`AsyncClient` to use.
        queues: the queues to fetch from, in order.
        concurrency: the most handlers run at once (and the largest fetch).
        name: the worker name shown on its jobs (default ``host/pid-N``).
        lease_ms: the lease of each fetch (default: each job's own ``lease_ms``).
        wait_ms: the long poll of each fetch (≤ 60000).
        grace: seconds running handlers get to finish at shutdown before
            they are cancelled and their jobs released.
        heartbeat: the fraction of a lease after which it is extended.
        threads: size of the pool for blocking handlers (default ``concurrency``).
        consumer_group, group: fetch the jobs of a consumer group, or of one
            group (the ``group`` jobs are enqueued with) only.
        runs: fetch runs of ordered groups and handle each run's jobs in
            order, one after another, stopping the run at the first job that
            does not end (see the module's documentation). Jobs waiting their
            turn in a run count against ``concurrency``.
        max_groups: with ``runs``, fetch the jobs of at most this many groups
            of each queue (``fetch(..., max_groups=...)``): 1 takes one
            group's run a fetch, whichever group. None: any number.
    """

    def __init__(self, client: AsyncClient, queues: Union[str, Sequence[str]], *,
                 concurrency: int = 10, name: Optional[str] = None,
                 lease_ms: Optional[int] = None, wait_ms: int = 30000, grace: float = 30.0,
                 heartbeat: float = 1 / 3, threads: Optional[int] = None,
                 consumer_group: Optional[str] = None, group: Optional[str] = None,
                 runs: bool = False, max_groups: Optional[int] = None) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.client = client
        self.queues = [queues] if isinstance(queues, str) else list(queues)
        self.concurrency = concurrency
        self.name = name or f"{socket.gethostname()}/pid-{os.getpid()}"
        self.lease_ms = lease_ms
        self.wait_ms = min(max(0, wait_ms), MAX_WAIT_MS)
        self.grace = grace
        self.heartbeat = heartbeat
        self.consumer_group = consumer_group
        self.group = group
        self.runs = runs
        self.max_groups = max_groups
        self._threads = threads or concurrency
        self._handlers: Dict[str, Handler] = {}
        self._is_async: Dict[str, bool] = {}
        self._inflight: Dict[str, _Entry] = {}
        self._chains: Set["asyncio.Task[None]"] = set()  # the tasks running runs
        self._running = 0  # handlers running: slots in use
        self._executor: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self._stopping: Optional[asyncio.Event] = None
        self._hard: Optional[asyncio.Event] = None
        self._changed: Optional[asyncio.Event] = None
        self._abandoned: List[_Entry] = []
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[int] = None
        self._stop_early = False
        self._lock = threading.Lock()
        self._settler = _Settler(client, min(concurrency, _MAX_SETTLE_ITEMS))
        #: How many jobs the last run released unfinished at shutdown (those of
        #: a run the server had put back already not counted).
        self.released = 0

    # ---- registration -----------------------------------------------------

    def register(self, kind: str, handler: Handler) -> None:
        """Runs ``handler`` for jobs of ``kind``."""
        self._handlers[kind] = handler
        self._is_async[kind] = inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
            getattr(handler, "__call__", None))

    def handle(self, kind: str) -> Callable[[Handler], Handler]:
        """Decorator form of :meth:`register`: ``@worker.handle("send_email")``."""
        def deco(fn: Handler) -> Handler:
            self.register(kind, fn)
            return fn
        return deco

    # ---- lifecycle --------------------------------------------------------

    def stop(self) -> None:
        """Begins a graceful shutdown (safe to call from any thread); a second
        call ends the grace period at once."""
        with self._lock:
            loop = self._loop
            if loop is None:
                self._stop_early = True  # run() has not begun: it returns at once
                return
        def _stop() -> None:
            assert self._stopping is not None and self._hard is not None
            if self._stopping.is_set():
                self._hard.set()
            self._stopping.set()
            self._settler.flush()  # outcomes waiting to be shared go now
        try:
            if threading.get_ident() == self._thread:
                _stop()
            else:
                loop.call_soon_threadsafe(_stop)
        except RuntimeError:
            pass

    def run_sync(self) -> None:
        """Runs the worker in a new event loop until SIGTERM or SIGINT."""
        asyncio.run(self.run())

    async def run(self, *, handle_signals: bool = True) -> None:
        """Fetches and runs jobs until :meth:`stop` (or, with ``handle_signals``,
        SIGTERM/SIGINT), then shuts down gracefully: no more fetches, running
        handlers get ``grace`` seconds, and the jobs still held are released."""
        self._stopping = asyncio.Event()
        self._hard = asyncio.Event()
        self._changed = asyncio.Event()
        self._abandoned = []
        self._chains = set()
        self.released = 0
        self._running = 0
        self._settler = _Settler(self.client, min(self.concurrency, _MAX_SETTLE_ITEMS))
        with self._lock:
            self._loop = asyncio.get_running_loop()
            self._thread = threading.get_ident()
            if self._stop_early:
                self._stop_early = False
                self._stopping.set()
        installed = []
        if handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                try:
                    self._loop.add_signal_handler(sig, self.stop)
                    installed.append(sig)
                except (NotImplementedError, RuntimeError):
                    pass
        heartbeat = asyncio.ensure_future(self._heartbeat_loop())
        try:
            await self._fetch_loop()
        finally:
            try:
                await self._drain()
            finally:
                heartbeat.cancel()
                try:
                    await heartbeat
                except asyncio.CancelledError:
                    pass
                for sig in installed:
                    self._loop.remove_signal_handler(sig)
                if self._executor is not None:
                    self._executor.shutdown(wait=False)
                    self._executor = None

    async def _drain(self) -> None:
        assert self._hard is not None
        tasks = [e.task for e in self._inflight.values() if e.task is not None] + list(self._chains)
        if tasks and self.grace > 0:
            hard = asyncio.ensure_future(self._hard.wait())
            deadline = time.monotonic() + self.grace
            pending: Set["asyncio.Future[Any]"] = set(tasks)
            while pending and not self._hard.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                _, pending = await asyncio.wait(pending | {hard}, timeout=left,
                                                return_when=asyncio.FIRST_COMPLETED)
                pending.discard(hard)
            hard.cancel()
        for e in list(self._inflight.values()):
            e.cancel("shutdown")
        # The jobs of a run not started are handed back by its run's task.
        rest = [e.task for e in self._inflight.values() if e.task is not None] + list(self._chains)
        if rest:
            await asyncio.wait(rest, timeout=5)
        if self._abandoned:
            items = [{"id": e.job.id, "token": e.job.token} for e in self._abandoned]
            self.released += len(items)
            try:
                results = await self.client.release_many(items)
                for r in results:
                    if r.error is not None:
                        log.warning("release of job %s failed: %s", r.id, r.error)
            except SpoolError as err:
                log.warning("release of %d jobs failed; they run again when their leases expire: %s",
                            len(items), err)

    async def _fetch_loop(self) -> None:
        assert self._stopping is not None and self._changed is not None
        failures = 0
        stop_wait = asyncio.ensure_future(self._stopping.wait())
        try:
            while not self._stopping.is_set():
                free = self._free()
                if free <= 0:
                    self._changed.clear()
                    changed = asyncio.ensure_future(self._changed.wait())
                    await asyncio.wait({changed, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
                    changed.cancel()
                    continue
                if free < (self.concurrency + 1) // 2 and self._running > 0:
                    free = await self._gather_free(free)
                    if free <= 0 or self._stopping.is_set():
                        continue
                fetch = asyncio.ensure_future(self.client.fetch(
                    self.queues, max=free, wait_ms=self.wait_ms, lease_ms=self.lease_ms,
                    worker=self.name, consumer_group=self.consumer_group, group=self.group,
                    runs=self.runs, max_groups=self.max_groups))
                await asyncio.wait({fetch, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
                if not fetch.done():
                    fetch.cancel()
                    try:
                        await fetch
                    except (asyncio.CancelledError, Exception):
                        pass
                    break
                try:
                    jobs = fetch.result()
                except _PERMANENT:
                    raise
                except SpoolError as err:
                    failures += 1
                    delay = min(5.0, 0.1 * 2 ** failures)
                    log.warning("fetch failed; retrying in %.1fs: %s", delay, err)
                    try:
                        await asyncio.wait_for(asyncio.shield(stop_wait), delay)
                    except asyncio.TimeoutError:
                        pass
                    continue
                failures = 0
                if self._stopping.is_set():
                    if jobs:
                        await self._release_now(jobs)
                    break
                if jobs and self.runs:
                    self._start_runs(jobs)
                elif jobs:
                    self._start(jobs)
        finally:
            stop_wait.cancel()

    def _free(self) -> int:
        """Free slots: handlers that may start, as long as the jobs held (running,
        or waiting for their outcome's answer) stay within four times ``concurrency``."""
        return min(self.concurrency - self._running, 4 * self.concurrency - len(self._inflight))

    async def _gather_free(self, free: int) -> int:
        """Waits up to ``SETTLE_DELAY`` for running handlers to free half the slots,
        so that handlers that finish together share one fetch; returns the free
        slots."""
        assert self._changed is not None and self._stopping is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_DELAY
        half = (self.concurrency + 1) // 2
        while free < half and self._running > 0 and not self._stopping.is_set():
            left = deadline - loop.time()
            if left <= 0:
                break
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except asyncio.TimeoutError:
                break
            free = self._free()
        return self._free()

    async def _release_now(self, jobs: List[Job]) -> None:
        try:
            await self.client.release_many([{"id": j.id, "token": j.token} for j in jobs])
        except SpoolError as err:
            log.warning("release of jobs fetched during shutdown failed: %s", err)

    # ---- running a job ----------------------------------------------------

    def _start(self, jobs: List[Job]) -> None:
        """Runs fetched jobs, each in a task of its own."""
        loop, changed = self._loop, self._changed
        assert loop is not None and changed is not None
        now = time.monotonic()
        for job in jobs:
            lease_ms = self.lease_ms or job.lease_ms or 30000
            entry = _Entry(job, JobContext(self, job, loop), lease_ms)
            entry.next_extend = now + lease_ms / 1000.0 * self.heartbeat
            self._inflight[job.id] = entry
            entry.task = loop.create_task(self._run_job(entry))
        self._running += len(jobs)
        self._settler.expect(len(jobs))
        changed.set()

    def _start_runs(self, jobs: List[Job]) -> None:
        """Runs fetched jobs run by run: those of one queue and group, in the
        order received, one after another in a task of their own. Each job
        holds a slot from now until its handler returns or it is dropped."""
        loop, changed = self._loop, self._changed
        assert loop is not None and changed is not None
        now = time.monotonic()
        runs: Dict[Any, List[_Entry]] = {}
        for job in jobs:
            lease_ms = self.lease_ms or job.lease_ms or 30000
            entry = _Entry(job, JobContext(self, job, loop), lease_ms)
            entry.next_extend = now + lease_ms / 1000.0 * self.heartbeat
            self._inflight[job.id] = entry
            key = (job.queue, job.group) if job.group else job.id
            runs.setdefault(key, []).append(entry)
        self._running += len(jobs)
        for run in runs.values():
            task = loop.create_task(self._run_chain(run))
            self._chains.add(task)
            task.add_done_callback(self._chains.discard)
        changed.set()

    async def _run_chain(self, run: List[_Entry]) -> None:
        """Runs the jobs of one run in order, each once the one before it ended
        (its outcome answered); once one does not end, or the worker stops, the
        jobs not started are dropped (see :meth:`_drop_run`)."""
        loop = asyncio.get_running_loop()
        assert self._stopping is not None
        for i, entry in enumerate(run):
            if i > 0 and self._stopping.is_set():
                await self._drop_run(run[i:])
                return
            self._settler.expect(1)
            entry.task = loop.create_task(self._run_job(entry))
            try:
                ended = await asyncio.shield(entry.task)
            except asyncio.CancelledError:
                ended = False
            if not ended:
                await self._drop_run(run[i + 1:])
                return

    async def _drop_run(self, rest: List[_Entry]) -> None:
        """Drops ``rest``, the jobs of a run not started, unrun: hands those whose
        leases are not known lost back in one release call, in order, then lets
        them all go. On an ordered queue the server has put them back already (or
        puts the later ones back with the first released) and answers
        ``lease_lost``, as expected; on another queue the release makes them
        available again before their leases run out. A failed call is logged, and
        the jobs then wait out their leases."""
        assert self._stopping is not None
        items = [{"id": e.job.id, "token": e.job.token} for e in rest if e.reason != "lost"]
        if items:
            try:
                results = await self.client.release_many(items)
            except SpoolError as err:
                log.warning("release of %d dropped jobs of a run failed; they run again when "
                            "their leases expire: %s", len(items), err)
            else:
                for r in results:
                    if r.error is None:
                        if self._stopping.is_set():
                            self.released += 1
                    elif not isinstance(r.error, (LeaseLost, NotFound)):
                        log.warning("release of job %s failed: %s", r.id, r.error)
        for e in rest:
            self._forget(e, started=False)

    async def _call_blocking(self, handler: Handler, ctx: JobContext) -> Any:
        """Runs a plain function handler in the thread pool (with the context of
        the task, which holds the job)."""
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=self._threads, thread_name_prefix="spool-worker")
        run = functools.partial(contextvars.copy_context().run, handler, ctx)
        result = await asyncio.get_running_loop().run_in_executor(self._executor, run)
        if asyncio.iscoroutine(result):
            result = await result
        return result

    async def _run_job(self, entry: _Entry) -> bool:
        """Runs ``entry``'s handler and sends its outcome; reports whether the job
        was acked (completed, or cancelled when asked), so that the rest of its run
        may go on."""
        job = entry.job
        token = job.token or 0
        try:
            if entry.reason is not None:
                # Cancelled while it waited its turn in a run.
                self._handler_done(entry)
                return await self._cancelled(entry)
            handler = self._handlers.get(job.kind)
            if handler is None:
                self._handler_done(entry)
                return await self._fail(entry, f"no handler for kind {job.kind!r} on worker {self.name}")
            try:
                ctx_token = _current.set(entry.ctx)
                try:
                    if self._is_async.get(job.kind, False):
                        result = await handler(entry.ctx)  # type: ignore[misc,unused-ignore]
                    else:
                        result = await self._call_blocking(handler, entry.ctx)
                finally:
                    _current.reset(ctx_token)
                    self._handler_done(entry)
            except asyncio.CancelledError:
                return await self._cancelled(entry)
            except NoRetry as err:
                return await self._fail(entry, _error_text(err), no_retry=True)
            except RetryAfter as err:
                return await self._fail(entry, _error_text(err),
                                        retry_after_ms=max(0, int(err.seconds * 1000)))
            except Exception as err:
                return await self._fail(entry, _error_text(err))
            if entry.reason is not None:
                # Cancelled while a blocking handler ran: its result is not kept.
                return await self._cancelled(entry)
            item: Dict[str, Any] = {"id": job.id, "token": token}
            size = 64
            if result is not None:
                # Checked here, so that a result JSON cannot hold (NaN among
                # them) fails its own job, not the call its ack shares.
                if isinstance(result, (str, bool, int)):
                    size += len(result) if isinstance(result, str) else 0
                else:
                    try:
                        size += len(json.dumps(result, allow_nan=False))
                    except (TypeError, ValueError) as err:
                        return await self._fail(entry, f"the handler's result is not JSON: {err}")
                item["result"] = result
            return await self._finish(entry, False, item, size)
        except asyncio.CancelledError:
            if entry.reason == "shutdown":
                self._abandoned.append(entry)
            return False
        finally:
            self._forget(entry, started=True)

    def _forget(self, entry: _Entry, *, started: bool) -> None:
        """Lets go of ``entry``: its slot frees, its lease is no longer extended,
        and (``started``: its outcome was counted on) an outcome that did not
        come is no longer waited for."""
        self._handler_done(entry)
        if started and not entry.arrived:  # dropped: its outcome will not come
            entry.arrived = True
            self._settler.expect(-1)
        self._inflight.pop(entry.job.id, None)
        if self._changed is not None:
            self._changed.set()

    def _handler_done(self, entry: _Entry) -> None:
        """Frees the slot of ``entry``'s handler, once."""
        if entry.running:
            entry.running = False
            self._running -= 1
            if self._changed is not None:
                self._changed.set()

    async def _fail(self, entry: _Entry, error: str, *, no_retry: bool = False,
                    retry_after_ms: Optional[int] = None) -> bool:
        item: Dict[str, Any] = {"id": entry.job.id, "token": entry.job.token or 0, "error": error}
        if no_retry:
            item["no_retry"] = True
        if retry_after_ms is not None:
            item["retry_after_ms"] = retry_after_ms
        return await self._finish(entry, True, item, 64 + len(error))

    async def _cancelled(self, entry: _Entry) -> bool:
        job = entry.job
        if entry.reason == "cancel_requested":
            return await self._fail(entry, "cancelled")
        if entry.reason == "shutdown":
            self._abandoned.append(entry)
        elif entry.reason == "lost":
            log.warning("job %s: lease lost; its handler was cancelled", job.id)
        else:
            # Cancelled from outside the worker: hand the job back.
            self._abandoned.append(entry)
        return False

    async def _finish(self, entry: _Entry, fail: bool, item: Dict[str, Any], size: int) -> bool:
        """Sends a job's outcome, with those of the jobs that finish with it, again
        after errors that retrying can fix, for as long as the job's lease lasts;
        it is not cancelled meanwhile. Reports whether the job ended: its outcome
        was an ack answered completed or cancelled."""
        entry.finishing = True
        assert self._stopping is not None
        deadline = time.monotonic() + entry.lease_ms / 1000.0
        attempt = 0
        while True:
            arrived = not entry.arrived
            entry.arrived = True
            try:
                # The item is sent whatever happens to this task: the settler
                # holds it, and cancelling the wait cancels only the wait.
                answer = await self._settler.submit(fail, item, size, arrived, self._stopping.is_set())
                return not fail and answer.state in _ACKED
            except (LeaseLost, NotFound):
                log.warning("job %s: lease lost; its outcome was dropped", entry.job.id)
                return False
            except (TransportError, Unavailable, StorageFull, InternalError) as err:
                attempt += 1
                delay = min(2.0, 0.05 * 2 ** attempt)
                if time.monotonic() + delay >= deadline:
                    log.warning("job %s: could not record its outcome; it runs again when its "
                                "lease expires: %s", entry.job.id, err)
                    return False
                await asyncio.sleep(delay)
            except SpoolError as err:
                log.warning("job %s: could not record its outcome: %s", entry.job.id, err)
                return False

    # ---- heartbeat --------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        assert self._changed is not None
        while True:
            now = time.monotonic()
            due = [e for e in self._inflight.values() if e.reason is None]
            if not due:
                await asyncio.sleep(0.05)
                continue
            soonest = min(e.next_extend for e in due)
            if soonest > now:
                await asyncio.sleep(min(soonest - now, 0.25))
                continue
            items = [{"id": e.job.id, "token": e.job.token, "lease_ms": e.lease_ms} for e in due]
            sent = time.monotonic()
            try:
                results = await self.client.extend_many(items)
            except SpoolError as err:
                log.warning("heartbeat failed: %s", err)
                await asyncio.sleep(0.2)
                continue
            for e, r in zip(due, results):
                e.next_extend = sent + e.lease_ms / 1000.0 * self.heartbeat
                if r.error is not None:
                    if isinstance(r.error, (LeaseLost, NotFound)):
                        e.cancel("lost")
                    else:
                        log.warning("extend of job %s failed: %s", e.job.id, r.error)
                elif r.cancel_requested:
                    e.cancel("cancel_requested")


def _error_text(err: BaseException) -> str:
    cause = err.__cause__ if isinstance(err, (NoRetry, RetryAfter)) and err.__cause__ else err
    head = f"{type(cause).__name__}: {cause}"
    tb = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    return (head + "\n\n" + tb)[:_MAX_ERROR]
