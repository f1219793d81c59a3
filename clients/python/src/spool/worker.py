"""An asyncio worker: fetches jobs in batches with long polling, runs their
handlers concurrently, keeps their leases alive with one heartbeat loop, and
acks or fails each job with its handler's outcome.

Handlers are registered by kind and take a :class:`JobContext`. An ``async def``
handler runs as an asyncio task; a plain function runs in a thread pool so
that blocking code does not stall the worker.
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
import signal
import socket
import threading
import time
import traceback
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence, Set, Union

from .client import MAX_WAIT_MS, AsyncClient
from .errors import (
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
    RetryAfter,
    SpoolError,
    Unauthorized,
)
from ._context import current as _current
from .models import ItemResult, Job

__all__ = ["JobContext", "Worker", "current_job"]

log = logging.getLogger("spool.worker")

Handler = Callable[["JobContext"], Union[Any, Awaitable[Any]]]


# The most of an error's text the server keeps.
_MAX_ERROR = 64 * 1024


def current_job() -> Optional["JobContext"]:
    """The :class:`JobContext` of the handler running in this context, if any."""
    return _current.get()


class JobContext:
    """What a handler gets: the leased job and ways to talk about it.

    Attributes:
        job: the :class:`~spool.models.Job` as fetched (active, with its lease).
    """

    def __init__(self, worker: "Worker", job: Job, loop: asyncio.AbstractEventLoop) -> None:
        self.job = job
        self._worker = worker
        self._loop = loop
        self._cancelled = threading.Event()

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
        return self._cancelled.is_set()

    def wait_cancelled(self, timeout: Optional[float] = None) -> bool:
        """Blocks (in a thread handler) until cancelled or ``timeout`` passes."""
        return self._cancelled.wait(timeout)

    async def progress(self, value: Any) -> None:
        """Records a progress report (any JSON value) for the job."""
        await self._worker.client.progress(self.job.id, self.token, value)

    def progress_sync(self, value: Any) -> None:
        """:meth:`progress` for blocking handlers running in the thread pool."""
        fut = asyncio.run_coroutine_threadsafe(self.progress(value), self._loop)
        fut.result()


class _Entry:
    __slots__ = ("job", "ctx", "task", "lease_ms", "next_extend", "reason", "finishing")

    def __init__(self, job: Job, ctx: JobContext, lease_ms: int) -> None:
        self.job = job
        self.ctx = ctx
        self.task: Optional["asyncio.Task[None]"] = None
        self.lease_ms = lease_ms
        self.next_extend = 0.0
        self.reason: Optional[str] = None  # why the worker cancelled it
        self.finishing = False  # its outcome is being sent: no more cancels

    def cancel(self, reason: str) -> None:
        if self.finishing:
            return
        if self.reason is None:
            self.reason = reason
        self.ctx._cancelled.set()
        if self.task is not None and not self.task.done():
            self.task.cancel()


class _Batcher:
    """Gathers the acks (or fails) of jobs that finish together into one batch
    call; each caller gets its own item's answer or error."""

    def __init__(self, send: Callable[[List[Dict[str, Any]]], Awaitable[List[ItemResult]]],
                 linger: float = 0.002, max_items: int = 1000) -> None:
        self._send = send
        self._linger = linger
        self._max = max_items
        self._items: List[Dict[str, Any]] = []
        self._futures: List["asyncio.Future[ItemResult]"] = []
        self._task: Optional["asyncio.Task[None]"] = None

    def submit(self, item: Dict[str, Any]) -> "asyncio.Future[ItemResult]":
        fut: "asyncio.Future[ItemResult]" = asyncio.get_running_loop().create_future()
        self._items.append(item)
        self._futures.append(fut)
        if self._task is None:
            self._task = asyncio.ensure_future(self._flush())
        return fut

    async def _flush(self) -> None:
        await asyncio.sleep(self._linger)
        while self._items:
            items, futures = self._items[:self._max], self._futures[:self._max]
            del self._items[:self._max], self._futures[:self._max]
            try:
                results = await self._send(items)
            except Exception as err:  # the whole call failed: every item did
                for f in futures:
                    if not f.done():
                        f.set_exception(err)
                continue
            for f, r in zip(futures, results):
                if f.done():
                    continue
                if r.error is not None:
                    f.set_exception(r.error)
                else:
                    f.set_result(r)
        self._task = None


# Errors retrying a fetch does not fix.
_PERMANENT = (Unauthorized, Forbidden, InvalidArgument, InvalidJSON, NotFound)


class Worker:
    """Runs handlers for the jobs of some queues.

    Args:
        client: the :class:`AsyncClient` to use.
        queues: the queues to fetch from, in order.
        concurrency: the most jobs run at once (and the largest fetch).
        name: the worker name shown on its jobs (default ``host/pid-N``).
        lease_ms: the lease of each fetch (default: each job's own ``lease_ms``).
        wait_ms: the long poll of each fetch (≤ 60000).
        grace: seconds running handlers get to finish at shutdown before
            they are cancelled and their jobs released.
        heartbeat: the fraction of a lease after which it is extended.
        threads: size of the pool for blocking handlers (default ``concurrency``).
        consumer_group, group: fetch the jobs of a consumer group, or of one
            flow-control group only.
    """

    def __init__(self, client: AsyncClient, queues: Union[str, Sequence[str]], *,
                 concurrency: int = 10, name: Optional[str] = None,
                 lease_ms: Optional[int] = None, wait_ms: int = 30000, grace: float = 30.0,
                 heartbeat: float = 1 / 3, threads: Optional[int] = None,
                 consumer_group: Optional[str] = None, group: Optional[str] = None) -> None:
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
        self._threads = threads or concurrency
        self._handlers: Dict[str, Handler] = {}
        self._inflight: Dict[str, _Entry] = {}
        self._executor: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self._stopping: Optional[asyncio.Event] = None
        self._hard: Optional[asyncio.Event] = None
        self._changed: Optional[asyncio.Event] = None
        self._abandoned: List[_Entry] = []
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[int] = None
        self._stop_early = False
        self._lock = threading.Lock()
        self._acks = _Batcher(client.ack_many)
        self._fails = _Batcher(client.fail_many)
        #: How many jobs the last run released unfinished at shutdown.
        self.released = 0

    # ---- registration -----------------------------------------------------

    def register(self, kind: str, handler: Handler) -> None:
        """Runs ``handler`` for jobs of ``kind``."""
        self._handlers[kind] = handler

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
        self.released = 0
        self._acks = _Batcher(self.client.ack_many)
        self._fails = _Batcher(self.client.fail_many)
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
        tasks = [e.task for e in self._inflight.values() if e.task is not None]
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
        rest = [e.task for e in self._inflight.values() if e.task is not None]
        if rest:
            await asyncio.wait(rest, timeout=5)
        if self._abandoned:
            items = [{"id": e.job.id, "token": e.job.token} for e in self._abandoned]
            self.released = len(items)
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
                free = self.concurrency - len(self._inflight)
                if free <= 0:
                    self._changed.clear()
                    changed = asyncio.ensure_future(self._changed.wait())
                    await asyncio.wait({changed, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
                    changed.cancel()
                    continue
                fetch = asyncio.ensure_future(self.client.fetch(
                    self.queues, max=free, wait_ms=self.wait_ms, lease_ms=self.lease_ms,
                    worker=self.name, consumer_group=self.consumer_group, group=self.group))
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
                for job in jobs:
                    self._start(job)
        finally:
            stop_wait.cancel()

    async def _release_now(self, jobs: List[Job]) -> None:
        try:
            await self.client.release_many([{"id": j.id, "token": j.token} for j in jobs])
        except SpoolError as err:
            log.warning("release of jobs fetched during shutdown failed: %s", err)

    # ---- running a job ----------------------------------------------------

    def _start(self, job: Job) -> None:
        assert self._loop is not None and self._changed is not None
        lease_ms = self.lease_ms or job.lease_ms or 30000
        entry = _Entry(job, JobContext(self, job, self._loop), lease_ms)
        entry.next_extend = time.monotonic() + lease_ms / 1000.0 * self.heartbeat
        self._inflight[job.id] = entry
        entry.task = asyncio.ensure_future(self._run_job(entry))
        self._changed.set()

    async def _call_handler(self, handler: Handler, ctx: JobContext) -> Any:
        token = _current.set(ctx)
        try:
            if inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
                    getattr(handler, "__call__", None)):
                return await handler(ctx)  # type: ignore[misc,unused-ignore]
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=self._threads, thread_name_prefix="spool-worker")
            run = functools.partial(contextvars.copy_context().run, handler, ctx)
            result = await asyncio.get_running_loop().run_in_executor(self._executor, run)
            if asyncio.iscoroutine(result):
                result = await result
            return result
        finally:
            _current.reset(token)

    async def _run_job(self, entry: _Entry) -> None:
        job = entry.job
        try:
            handler = self._handlers.get(job.kind)
            if handler is None:
                await self._finish(entry, lambda: self._fail(
                    job.id, job.token or 0, f"no handler for kind {job.kind!r} on worker {self.name}"))
                return
            try:
                result = await self._call_handler(handler, entry.ctx)
            except asyncio.CancelledError:
                await self._cancelled(entry)
                return
            except NoRetry as err:
                await self._finish(entry, lambda: self._fail(
                    job.id, job.token or 0, _error_text(err), no_retry=True))
                return
            except RetryAfter as err:
                await self._finish(entry, lambda: self._fail(
                    job.id, job.token or 0, _error_text(err),
                    retry_after_ms=max(0, int(err.seconds * 1000))))
                return
            except Exception as err:
                await self._finish(entry, lambda: self._fail(job.id, job.token or 0, _error_text(err)))
                return
            if entry.reason is not None:
                # Cancelled while a blocking handler ran: its result is not kept.
                await self._cancelled(entry)
                return
            try:
                json.dumps(result)
            except (TypeError, ValueError) as err:
                await self._finish(entry, lambda: self._fail(
                    job.id, job.token or 0, f"the handler's result is not JSON: {err}"))
                return
            await self._finish(entry, lambda: self._ack(job.id, job.token or 0, result))
        except asyncio.CancelledError:
            if entry.reason == "shutdown":
                self._abandoned.append(entry)
        finally:
            self._inflight.pop(job.id, None)
            if self._changed is not None:
                self._changed.set()

    def _ack(self, job_id: str, token: int, result: Any = None) -> "asyncio.Future[ItemResult]":
        item: Dict[str, Any] = {"id": job_id, "token": token}
        if result is not None:
            item["result"] = result
        return self._acks.submit(item)

    def _fail(self, job_id: str, token: int, error: str, *, no_retry: bool = False,
              retry_after_ms: Optional[int] = None) -> "asyncio.Future[ItemResult]":
        item: Dict[str, Any] = {"id": job_id, "token": token, "error": error}
        if no_retry:
            item["no_retry"] = True
        if retry_after_ms is not None:
            item["retry_after_ms"] = retry_after_ms
        return self._fails.submit(item)

    async def _cancelled(self, entry: _Entry) -> None:
        job = entry.job
        if entry.reason == "cancel_requested":
            await self._finish(entry, lambda: self._fail(job.id, job.token or 0, "cancelled"))
        elif entry.reason == "shutdown":
            self._abandoned.append(entry)
        elif entry.reason == "lost":
            log.warning("job %s: lease lost; its handler was cancelled", job.id)
        else:
            # Cancelled from outside the worker: hand the job back.
            self._abandoned.append(entry)

    async def _finish(self, entry: _Entry, call: Callable[[], Awaitable[Any]]) -> None:
        """Sends a job's outcome, again after errors that retrying can fix, for
        as long as the job's lease lasts; it is not cancelled meanwhile."""
        entry.finishing = True
        deadline = time.monotonic() + entry.lease_ms / 1000.0
        attempt = 0
        while True:
            try:
                await asyncio.shield(asyncio.ensure_future(call()))
                return
            except (LeaseLost, NotFound):
                log.warning("job %s: lease lost; its outcome was dropped", entry.job.id)
                return
            except (TransportError, Unavailable, StorageFull, InternalError) as err:
                attempt += 1
                delay = min(2.0, 0.05 * 2 ** attempt)
                if time.monotonic() + delay >= deadline:
                    log.warning("job %s: could not record its outcome; it runs again when its "
                                "lease expires: %s", entry.job.id, err)
                    return
                await asyncio.sleep(delay)
            except SpoolError as err:
                log.warning("job %s: could not record its outcome: %s", entry.job.id, err)
                return

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
