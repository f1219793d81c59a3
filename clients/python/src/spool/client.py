"""HTTP clients for Spool: :class:`AsyncClient` (asyncio) and :class:`Client` (blocking).

Both speak the same wire protocol (docs/protocol.md) through the same
methods; the async client's methods return awaitables.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union
from urllib.parse import quote, urlencode

import httpx

from . import _context
from ._stream import UNKNOWN_STREAM, StreamClient, StreamError, StreamRefused, streamable
from .errors import TransportError, error_from_body
from .models import (
    EnqueueResult,
    ItemResult,
    Job,
    JobPage,
    JobSpec,
    Queue,
    format_time,
    parse_time,
)

__all__ = ["AsyncClient", "Client", "DEFAULT_URL"]

#: The server's default address.
DEFAULT_URL = "http://127.0.0.1:7311"
_VERSION = "0.1.0"
# Statuses an idempotent call is sent again for.
_RETRY_STATUSES = frozenset({502, 503, 504, 507})
# The longest wait_ms the server takes on a fetch or a get.
MAX_WAIT_MS = 60000

JobLike = Union[JobSpec, Dict[str, Any]]


def _p(segment: str) -> str:
    return quote(segment, safe="")


def _job_body(job: JobLike) -> Dict[str, Any]:
    body = job.to_dict() if isinstance(job, JobSpec) else dict(job)
    if "traceparent" not in body:
        # A job enqueued by a handler continues the trace of the job it runs.
        tp = _context.traceparent()
        if tp:
            body["traceparent"] = tp
    return body


def _spec(kind_or_spec: Union[str, JobLike], payload: Any, options: Dict[str, Any]) -> Dict[str, Any]:
    if isinstance(kind_or_spec, str):
        return _job_body(JobSpec(kind_or_spec, payload, **options))
    if payload is not None or options:
        raise TypeError("enqueue: pass either a JobSpec (or dict) or a kind with options")
    return _job_body(kind_or_spec)


def _item_results(body: Dict[str, Any]) -> List[ItemResult]:
    out = []
    for r in body.get("results", []):
        err = error_from_body(0, {"error": r["error"]}) if "error" in r else None
        out.append(ItemResult(
            id=r.get("id", ""),
            state=r.get("state"),
            run_at=parse_time(r.get("run_at")),
            lease_expires_at=parse_time(r.get("lease_expires_at")),
            cancel_requested=bool(r.get("cancel_requested", False)),
            error=err,
        ))
    return out


def _single_result(body: Dict[str, Any]) -> ItemResult:
    return ItemResult(
        id=body.get("id", ""),
        state=body.get("state"),
        run_at=parse_time(body.get("run_at")),
        lease_expires_at=parse_time(body.get("lease_expires_at")),
        cancel_requested=bool(body.get("cancel_requested", False)),
    )


def _group_start(start: Optional[str], from_time: Any) -> Dict[str, Any]:
    body: Dict[str, Any] = {}
    if start is not None:
        body["start"] = start
    if from_time is not None:
        body["from"] = format_time(from_time)
    return body


def _query(params: Dict[str, Any]) -> str:
    """A query string of params, encoded as httpx encodes them."""
    return urlencode({k: ("true" if v is True else "false" if v is False else v) for k, v in params.items()})


def _drop_none(d: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


class _Call:
    """One request: what to send, whether it may be sent again, how to read the answer."""

    __slots__ = ("method", "path", "params", "body", "idempotent", "wait_ms", "parse")

    def __init__(self, method: str, path: str, *, params: Optional[Dict[str, Any]] = None,
                 body: Any = None, idempotent: bool = False, wait_ms: int = 0,
                 parse: Callable[[Any], Any] = lambda b: b) -> None:
        self.method = method
        self.path = path
        self.params = _drop_none(params or {}) or None
        self.body = body
        self.idempotent = idempotent
        self.wait_ms: int = wait_ms
        self.parse = parse


class _Base:
    """Configuration and the operations both clients share.

    Args:
        url: the server's base URL (default ``$SPOOL_SERVER``, which the CLI
            reads too, then ``$SPOOL_URL``, then http://127.0.0.1:7311).
        token: bearer token for a server with auth (default ``$SPOOL_TOKEN``).
        timeout: seconds each call may take, on top of any long-poll wait.
        retries: how many times an idempotent call (GETs, and enqueues whose
            jobs all carry an ``id``) is sent again after a transport error or
            a 502/503/504/507 answer, with exponential backoff.
    """

    def __init__(self, url: Optional[str] = None, *, token: Optional[str] = None,
                 timeout: float = 30.0, retries: int = 3) -> None:
        self.url = (url or os.environ.get("SPOOL_SERVER") or os.environ.get("SPOOL_URL")
                    or DEFAULT_URL).rstrip("/")
        token = token if token is not None else os.environ.get("SPOOL_TOKEN")
        self.timeout = timeout
        self.retries = retries
        self._headers = {"User-Agent": f"spool-python/{_VERSION}", "Accept": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"

    def _do(self, call: _Call) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def _timeout(self, call: _Call) -> float:
        return self.timeout + call.wait_ms / 1000.0

    @staticmethod
    def _delay(attempt: int) -> float:
        return min(2.0, 0.1 * 2.0 ** attempt) * (0.5 + random.random() / 2)

    @staticmethod
    def _answer(call: _Call, resp: httpx.Response) -> Any:
        return _Base._answer_bytes(call, resp.status_code, resp.content)

    @staticmethod
    def _answer_bytes(call: _Call, status: int, content: bytes) -> Any:
        if status >= 400:
            try:
                body = json.loads(content)
            except ValueError:
                body = None
            raise error_from_body(status, body)
        if status == 204 or not content:
            return call.parse(None)
        return call.parse(json.loads(content))

    # ---- jobs -------------------------------------------------------------

    def enqueue(self, kind: Union[str, JobLike], payload: Any = None, **options: Any) -> Any:
        """Enqueues one job: ``enqueue("send_email", {"to": …}, queue="emails", priority=5)``
        or ``enqueue(JobSpec(...))``. Returns an :class:`EnqueueResult`.

        Options: queue, id, priority, delay_ms, run_at, max_attempts, backoff,
        lease_ms, unique_key, unique_for_ms, tags, group, durability, traceparent.
        """
        body = _spec(kind, payload, options)
        return self._do(_Call("POST", "/v1/jobs", body=body, idempotent="id" in body,
                              parse=EnqueueResult.from_dict))

    def enqueue_many(self, jobs: Iterable[JobLike]) -> Any:
        """Enqueues jobs atomically in one call (``POST /v1/jobs/batch``); returns
        a list of :class:`EnqueueResult` in order."""
        bodies = [_job_body(j) for j in jobs]
        return self._do(_Call("POST", "/v1/jobs/batch", body={"jobs": bodies},
                              idempotent=all("id" in b for b in bodies),
                              parse=lambda b: [EnqueueResult.from_dict(r) for r in b["jobs"]]))

    def get(self, job_id: str, *, wait_ms: Optional[int] = None) -> Any:
        """Returns the :class:`Job`. With ``wait_ms`` (≤ 60000) the server holds the
        call until the job is completed, dead or cancelled, or the wait ends."""
        return self._do(_Call("GET", f"/v1/jobs/{_p(job_id)}", params={"wait_ms": wait_ms},
                              idempotent=True, wait_ms=wait_ms or 0, parse=Job.from_dict))

    def list_jobs(self, *, queue: Optional[str] = None, state: Optional[str] = None,
                  worker: Optional[str] = None, cursor: Optional[str] = None,
                  limit: Optional[int] = None) -> Any:
        """Lists jobs in enqueue order, one :class:`JobPage` at a time."""
        return self._do(_Call("GET", "/v1/jobs", idempotent=True,
                              params={"queue": queue, "state": state, "worker": worker,
                                      "cursor": cursor, "limit": limit},
                              parse=lambda b: JobPage([Job.from_dict(j) for j in b["jobs"]],
                                                      b.get("next_cursor"))))

    def cancel(self, job_id: str) -> Any:
        """Cancels a job (an active one gets ``cancel_requested``); returns the :class:`Job`."""
        return self._do(_Call("POST", f"/v1/jobs/{_p(job_id)}/cancel", parse=Job.from_dict))

    def retry(self, job_id: str) -> Any:
        """Makes a dead, cancelled, retrying or scheduled job available now."""
        return self._do(_Call("POST", f"/v1/jobs/{_p(job_id)}/retry", parse=Job.from_dict))

    def delete(self, job_id: str) -> Any:
        """Deletes a job that is not active."""
        return self._do(_Call("DELETE", f"/v1/jobs/{_p(job_id)}", parse=lambda b: None))

    # ---- working ----------------------------------------------------------

    def fetch(self, queues: Sequence[str], *, max: int = 1, wait_ms: int = 0,
              lease_ms: Optional[int] = None, worker: Optional[str] = None,
              consumer_group: Optional[str] = None, group: Optional[str] = None,
              runs: bool = False, max_groups: Optional[int] = None) -> Any:
        """Leases up to ``max`` jobs, long polling up to ``wait_ms``; returns a list of :class:`Job`.

        With ``runs``, a free group of an ordered queue may give several of its
        jobs, a run, in enqueue order (``max`` is shared across groups). Handle
        a run's jobs one after another and stop at the first that fails or is
        released: the server has put the rest of the run back already.

        ``max_groups`` (1 to 1000) takes the jobs of at most that many groups
        of each queue; with ``runs``, 1 takes one group's run, whichever group.
        None: any number of groups.
        """
        body = _drop_none({"queues": list(queues), "max": max, "wait_ms": wait_ms or None,
                           "lease_ms": lease_ms, "worker": worker,
                           "consumer_group": consumer_group, "group": group,
                           "runs": True if runs else None, "max_groups": max_groups})
        return self._do(_Call("POST", "/v1/fetch", body=body, wait_ms=wait_ms,
                              parse=lambda b: [Job.from_dict(j) for j in b["jobs"]]))

    def ack(self, job_id: str, token: int, result: Any = None) -> Any:
        """Completes a leased job with its result; returns an :class:`ItemResult`."""
        body: Dict[str, Any] = {"token": token}
        if result is not None:
            body["result"] = result
        return self._do(_Call("POST", f"/v1/jobs/{_p(job_id)}/ack", body=body, parse=_single_result))

    def fail(self, job_id: str, token: int, error: str, *, no_retry: bool = False,
             retry_after_ms: Optional[int] = None) -> Any:
        """Fails a leased job's attempt; it is retried after its backoff (or
        ``retry_after_ms``) unless it has no attempts left or ``no_retry``."""
        body = _drop_none({"token": token, "error": error, "no_retry": no_retry or None,
                           "retry_after_ms": retry_after_ms})
        return self._do(_Call("POST", f"/v1/jobs/{_p(job_id)}/fail", body=body, parse=_single_result))

    def extend(self, job_id: str, token: int, lease_ms: Optional[int] = None) -> Any:
        """Extends a lease; the :class:`ItemResult` says whether a cancel was requested."""
        body = _drop_none({"token": token, "lease_ms": lease_ms})
        return self._do(_Call("POST", f"/v1/jobs/{_p(job_id)}/extend", body=body, parse=_single_result))

    def progress(self, job_id: str, token: int, progress: Any) -> Any:
        """Records a progress report (any JSON value) for a leased job."""
        return self._do(_Call("POST", f"/v1/jobs/{_p(job_id)}/progress",
                              body={"token": token, "progress": progress}, parse=_single_result))

    def release(self, job_id: str, token: int) -> Any:
        """Hands a leased job back unrun: available again, the attempt not counted."""
        return self._do(_Call("POST", f"/v1/jobs/{_p(job_id)}/release", body={"token": token},
                              parse=_single_result))

    def ack_many(self, items: Iterable[Dict[str, Any]]) -> Any:
        """Batch ack: items ``{"id", "token", "result"}``; a list of :class:`ItemResult`."""
        return self._do(_Call("POST", "/v1/jobs/ack", body={"items": list(items)}, parse=_item_results))

    def fail_many(self, items: Iterable[Dict[str, Any]]) -> Any:
        """Batch fail: items ``{"id", "token", "error", "no_retry", "retry_after_ms"}``."""
        return self._do(_Call("POST", "/v1/jobs/fail", body={"items": list(items)}, parse=_item_results))

    def extend_many(self, items: Iterable[Dict[str, Any]]) -> Any:
        """Batch extend: items ``{"id", "token", "lease_ms"}``."""
        return self._do(_Call("POST", "/v1/jobs/extend", body={"items": list(items)}, parse=_item_results))

    def release_many(self, items: Iterable[Dict[str, Any]]) -> Any:
        """Batch release: items ``{"id", "token"}``."""
        return self._do(_Call("POST", "/v1/jobs/release", body={"items": list(items)}, parse=_item_results))

    # ---- queues -----------------------------------------------------------

    def queues(self) -> Any:
        """Lists the queues (a list of :class:`Queue`)."""
        return self._do(_Call("GET", "/v1/queues", idempotent=True,
                              parse=lambda b: [Queue.from_dict(q) for q in b["queues"]]))

    def queue(self, name: str) -> Any:
        """Returns one :class:`Queue`."""
        return self._do(_Call("GET", f"/v1/queues/{_p(name)}", idempotent=True, parse=Queue.from_dict))

    def pause(self, name: str) -> Any:
        """Pauses a queue: fetches hand out none of its jobs."""
        return self._do(_Call("POST", f"/v1/queues/{_p(name)}/pause", parse=Queue.from_dict))

    def resume(self, name: str) -> Any:
        """Resumes a paused queue."""
        return self._do(_Call("POST", f"/v1/queues/{_p(name)}/resume", parse=Queue.from_dict))

    def purge(self, name: str) -> Any:
        """Deletes a queue's available jobs; returns how many."""
        return self._do(_Call("POST", f"/v1/queues/{_p(name)}/purge", parse=lambda b: b["count"]))

    def retry_jobs(self, name: str, state: str) -> Any:
        """Retries every job of the queue in ``state``; returns how many."""
        return self._do(_Call("POST", f"/v1/queues/{_p(name)}/retry", body={"state": state},
                              parse=lambda b: b["count"]))

    def delete_jobs(self, name: str, state: str) -> Any:
        """Deletes every job of the queue in ``state`` (not active); returns how many."""
        return self._do(_Call("POST", f"/v1/queues/{_p(name)}/delete", body={"state": state},
                              parse=lambda b: b["count"]))

    def set_durability(self, name: str, durability: str) -> Any:
        """Sets the level of jobs later enqueued into the queue without one."""
        return self._do(_Call("POST", f"/v1/queues/{_p(name)}/durability",
                              body={"durability": durability}, parse=Queue.from_dict))

    def set_limits(self, name: str, limits: Dict[str, Any]) -> Any:
        """Replaces the queue's flow control (rate, max_active, group_rate,
        group_max_active, ordered)."""
        return self._do(_Call("PUT", f"/v1/queues/{_p(name)}/limits", body=dict(limits),
                              idempotent=True, parse=Queue.from_dict))

    def update_limits(self, name: str, patch: Dict[str, Any]) -> Any:
        """Changes the queue's limits named in ``patch`` and keeps the others
        (a JSON merge patch): a value sets a limit, ``None`` removes it, a key
        left out stays as it is; a ``rate`` dict is merged member by member,
        e.g. ``{"rate": {"limit": 200}, "max_active": None}``."""
        return self._do(_Call("PATCH", f"/v1/queues/{_p(name)}/limits", body=dict(patch),
                              idempotent=True, parse=Queue.from_dict))

    def clear_limits(self, name: str) -> Any:
        """Removes the queue's flow control."""
        return self._do(_Call("DELETE", f"/v1/queues/{_p(name)}/limits", idempotent=True,
                              parse=Queue.from_dict))

    def set_settings(self, name: str, settings: Dict[str, Any]) -> Any:
        """Replaces the queue's settings (dead_letter_queue, max_wait_ms, job defaults)."""
        return self._do(_Call("PUT", f"/v1/queues/{_p(name)}/settings", body=dict(settings),
                              idempotent=True, parse=Queue.from_dict))

    def update_settings(self, name: str, patch: Dict[str, Any]) -> Any:
        """Changes the queue's settings named in ``patch`` and keeps the
        others (a JSON merge patch): a value sets a setting, ``None`` clears
        it, a key left out stays as it is, e.g.
        ``{"default_lease_ms": 300000, "max_wait_ms": None}``."""
        return self._do(_Call("PATCH", f"/v1/queues/{_p(name)}/settings", body=dict(patch),
                              idempotent=True, parse=Queue.from_dict))

    def clear_settings(self, name: str) -> Any:
        """Clears the queue's settings."""
        return self._do(_Call("DELETE", f"/v1/queues/{_p(name)}/settings", idempotent=True,
                              parse=Queue.from_dict))

    # ---- schedules --------------------------------------------------------

    def put_schedule(self, name: str, job: JobLike, *, cron: Optional[str] = None,
                     timezone: Optional[str] = None, every_ms: Optional[int] = None,
                     misfire: Optional[str] = None, max_catch_up: Optional[int] = None,
                     paused: Optional[bool] = None) -> Any:
        """Defines (or replaces) a schedule that enqueues ``job`` at each tick of
        ``cron`` (in ``timezone``) or every ``every_ms``; returns the schedule (a dict)."""
        template = job.to_dict() if isinstance(job, JobSpec) else dict(job)
        body = _drop_none({"job": template, "cron": cron, "timezone": timezone,
                           "every_ms": every_ms, "misfire": misfire,
                           "max_catch_up": max_catch_up, "paused": paused})
        return self._do(_Call("PUT", f"/v1/schedules/{_p(name)}", body=body, idempotent=True))

    def schedule(self, name: str) -> Any:
        """Returns one schedule (a dict)."""
        return self._do(_Call("GET", f"/v1/schedules/{_p(name)}", idempotent=True))

    def schedules(self) -> Any:
        """Lists the schedules (dicts)."""
        return self._do(_Call("GET", "/v1/schedules", idempotent=True, parse=lambda b: b["schedules"]))

    def delete_schedule(self, name: str) -> Any:
        """Deletes a schedule."""
        return self._do(_Call("DELETE", f"/v1/schedules/{_p(name)}", parse=lambda b: None))

    def pause_schedule(self, name: str) -> Any:
        """Pauses a schedule: its ticks enqueue nothing."""
        return self._do(_Call("POST", f"/v1/schedules/{_p(name)}/pause"))

    def resume_schedule(self, name: str) -> Any:
        """Resumes a paused schedule."""
        return self._do(_Call("POST", f"/v1/schedules/{_p(name)}/resume"))

    def trigger_schedule(self, name: str) -> Any:
        """Enqueues the schedule's job now; returns ``{"job": {id, state, duplicate}, "schedule": …}``."""
        return self._do(_Call("POST", f"/v1/schedules/{_p(name)}/trigger"))

    # ---- consumer groups --------------------------------------------------

    def put_consumer_group(self, queue: str, group: str, *, start: Optional[str] = None,
                           from_time: Optional[Any] = None) -> Any:
        """Creates a consumer group of ``queue`` that receives a copy of its jobs,
        starting at ``start`` (``beginning``, ``new`` or ``time`` with ``from_time``)."""
        return self._do(_Call("PUT", f"/v1/queues/{_p(queue)}/consumer-groups/{_p(group)}",
                              body=_group_start(start, from_time), idempotent=True))

    def consumer_group(self, queue: str, group: str) -> Any:
        """Returns one consumer group (a dict: counts, pending, lag_ms, …)."""
        return self._do(_Call("GET", f"/v1/queues/{_p(queue)}/consumer-groups/{_p(group)}",
                              idempotent=True))

    def consumer_groups(self, queue: str) -> Any:
        """Lists the consumer groups of a queue (dicts)."""
        return self._do(_Call("GET", f"/v1/queues/{_p(queue)}/consumer-groups", idempotent=True,
                              parse=lambda b: b["consumer_groups"]))

    def delete_consumer_group(self, queue: str, group: str) -> Any:
        """Deletes a consumer group and its copies of the queue's jobs."""
        return self._do(_Call("DELETE", f"/v1/queues/{_p(queue)}/consumer-groups/{_p(group)}",
                              parse=lambda b: None))

    def seek_consumer_group(self, queue: str, group: str, *, start: Optional[str] = None,
                            from_time: Optional[Any] = None) -> Any:
        """Moves a consumer group to another start."""
        return self._do(_Call("POST", f"/v1/queues/{_p(queue)}/consumer-groups/{_p(group)}/seek",
                              body=_group_start(start, from_time)))

    def workers(self) -> Any:
        """Lists the workers that fetch (dicts: name, first_seen_at, last_seen_at, active)."""
        return self._do(_Call("GET", "/v1/workers", idempotent=True, parse=lambda b: b["workers"]))


class AsyncClient(_Base):
    """An asyncio client. Use ``async with AsyncClient(url) as c:`` or call :meth:`aclose`.

    For an ``http://`` URL that no proxy of the environment covers, and unless
    ``http`` is given, the client sends its calls as frames of one multiplexed
    connection, spool-stream/1 ("Stream transport" in docs/protocol.md), which
    saves most of the per-call work of HTTP; the calls, answers and errors are
    those of HTTP. Where the server or a proxy refuses the upgrade as unknown the
    client speaks HTTP for good; a call whose upgrade is refused for another
    reason (no token, a server stopping) goes over HTTP. Pass ``http`` (an
    ``httpx.AsyncClient``) for plain HTTP through it.
    """

    if TYPE_CHECKING:  # the shared methods of _Base, typed for this client
        async def enqueue(
            self,
            kind: Union[str, JobLike],
            payload: Any = None,
            **options: Any,
        ) -> EnqueueResult: ...
        async def enqueue_many(self, jobs: Iterable[JobLike]) -> List[EnqueueResult]: ...
        async def get(self, job_id: str, *, wait_ms: Optional[int] = None) -> Job: ...
        async def list_jobs(
            self,
            *,
            queue: Optional[str] = None,
            state: Optional[str] = None,
            worker: Optional[str] = None,
            cursor: Optional[str] = None,
            limit: Optional[int] = None,
        ) -> JobPage: ...
        async def cancel(self, job_id: str) -> Job: ...
        async def retry(self, job_id: str) -> Job: ...
        async def delete(self, job_id: str) -> None: ...
        async def fetch(
            self,
            queues: Sequence[str],
            *,
            max: int = 1,
            wait_ms: int = 0,
            lease_ms: Optional[int] = None,
            worker: Optional[str] = None,
            consumer_group: Optional[str] = None,
            group: Optional[str] = None,
            runs: bool = False,
            max_groups: Optional[int] = None,
        ) -> List[Job]: ...
        async def ack(self, job_id: str, token: int, result: Any = None) -> ItemResult: ...
        async def fail(
            self,
            job_id: str,
            token: int,
            error: str,
            *,
            no_retry: bool = False,
            retry_after_ms: Optional[int] = None,
        ) -> ItemResult: ...
        async def extend(
            self,
            job_id: str,
            token: int,
            lease_ms: Optional[int] = None,
        ) -> ItemResult: ...
        async def progress(self, job_id: str, token: int, progress: Any) -> ItemResult: ...
        async def release(self, job_id: str, token: int) -> ItemResult: ...
        async def ack_many(self, items: Iterable[Dict[str, Any]]) -> List[ItemResult]: ...
        async def fail_many(self, items: Iterable[Dict[str, Any]]) -> List[ItemResult]: ...
        async def extend_many(self, items: Iterable[Dict[str, Any]]) -> List[ItemResult]: ...
        async def release_many(self, items: Iterable[Dict[str, Any]]) -> List[ItemResult]: ...
        async def queues(self) -> List[Queue]: ...
        async def queue(self, name: str) -> Queue: ...
        async def pause(self, name: str) -> Queue: ...
        async def resume(self, name: str) -> Queue: ...
        async def purge(self, name: str) -> int: ...
        async def retry_jobs(self, name: str, state: str) -> int: ...
        async def delete_jobs(self, name: str, state: str) -> int: ...
        async def set_durability(self, name: str, durability: str) -> Queue: ...
        async def set_limits(self, name: str, limits: Dict[str, Any]) -> Queue: ...
        async def update_limits(self, name: str, patch: Dict[str, Any]) -> Queue: ...
        async def clear_limits(self, name: str) -> Queue: ...
        async def set_settings(self, name: str, settings: Dict[str, Any]) -> Queue: ...
        async def update_settings(self, name: str, patch: Dict[str, Any]) -> Queue: ...
        async def clear_settings(self, name: str) -> Queue: ...
        async def put_schedule(
            self,
            name: str,
            job: JobLike,
            *,
            cron: Optional[str] = None,
            timezone: Optional[str] = None,
            every_ms: Optional[int] = None,
            misfire: Optional[str] = None,
            max_catch_up: Optional[int] = None,
            paused: Optional[bool] = None,
        ) -> Dict[str, Any]: ...
        async def schedule(self, name: str) -> Dict[str, Any]: ...
        async def schedules(self) -> List[Dict[str, Any]]: ...
        async def delete_schedule(self, name: str) -> None: ...
        async def pause_schedule(self, name: str) -> Dict[str, Any]: ...
        async def resume_schedule(self, name: str) -> Dict[str, Any]: ...
        async def trigger_schedule(self, name: str) -> Dict[str, Any]: ...
        async def put_consumer_group(
            self,
            queue: str,
            group: str,
            *,
            start: Optional[str] = None,
            from_time: Optional[Any] = None,
        ) -> Dict[str, Any]: ...
        async def consumer_group(self, queue: str, group: str) -> Dict[str, Any]: ...
        async def consumer_groups(self, queue: str) -> List[Dict[str, Any]]: ...
        async def delete_consumer_group(self, queue: str, group: str) -> None: ...
        async def seek_consumer_group(
            self,
            queue: str,
            group: str,
            *,
            start: Optional[str] = None,
            from_time: Optional[Any] = None,
        ) -> Dict[str, Any]: ...
        async def workers(self) -> List[Dict[str, Any]]: ...

    def __init__(self, url: Optional[str] = None, *, token: Optional[str] = None,
                 timeout: float = 30.0, retries: int = 3,
                 http: Optional[httpx.AsyncClient] = None) -> None:
        super().__init__(url, token=token, timeout=timeout, retries=retries)
        self._stream: Optional[StreamClient] = None
        if http is None and streamable(self.url):
            self._stream = StreamClient(self.url, self._headers)
        self._http = http or httpx.AsyncClient(limits=httpx.Limits(max_connections=100))

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._stream is not None:
            self._stream.close()
        await self._http.aclose()

    async def _do(self, call: _Call) -> Any:
        attempt = 0
        while True:
            try:
                status, content = await self._send(call)
            except TransportError:
                if call.idempotent and attempt < self.retries:
                    await asyncio.sleep(self._delay(attempt))
                    attempt += 1
                    continue
                raise
            if status in _RETRY_STATUSES and call.idempotent and attempt < self.retries:
                await asyncio.sleep(self._delay(attempt))
                attempt += 1
                continue
            return self._answer_bytes(call, status, content)

    async def _send(self, call: _Call) -> Tuple[int, bytes]:
        """Sends one call, over the stream when there is one, and returns the status
        and body of its answer; raises TransportError when none came."""
        stream = self._stream
        if stream is not None:
            target = call.path + ("?" + _query(call.params) if call.params else "")
            body = b"" if call.body is None else json.dumps(
                call.body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
            try:
                return await stream.call(call.method, target, body, self._timeout(call))
            except StreamRefused as refused:
                if refused.status in UNKNOWN_STREAM:
                    self._stream = None  # the server does not serve the stream: HTTP for good
                    stream.close()
                # This call goes over HTTP, and gets the answer HTTP gives.
            except StreamError as e:
                raise TransportError(str(e)) from e
        try:
            resp = await self._http.request(
                call.method, self.url + call.path, params=call.params,
                json=call.body, headers=self._headers, timeout=self._timeout(call))
        except httpx.TransportError as e:
            raise TransportError(str(e) or type(e).__name__) from e
        return resp.status_code, resp.content

    async def await_job(self, job_id: str, timeout: Optional[float] = None) -> Job:
        """Waits until the job is completed, dead or cancelled and returns it; after
        ``timeout`` seconds (None: no limit) returns it as it is then."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = MAX_WAIT_MS
            if deadline is not None:
                wait = max(0, min(wait, int((deadline - time.monotonic()) * 1000)))
            job: Job = await self.get(job_id, wait_ms=wait or None)
            if job.done or (deadline is not None and time.monotonic() >= deadline):
                return job

    async def enqueue_and_wait(self, kind: Union[str, JobLike], payload: Any = None, *,
                               timeout: Optional[float] = None, **options: Any) -> Job:
        """Enqueues a job and waits for it to finish; returns the :class:`Job` (see ``await_job``)."""
        res: EnqueueResult = await self.enqueue(kind, payload, **options)
        return await self.await_job(res.id, timeout)


class Client(_Base):
    """A blocking client, for producers in synchronous code (Django views, scripts)."""

    if TYPE_CHECKING:  # the shared methods of _Base, typed for this client
        def enqueue(
            self,
            kind: Union[str, JobLike],
            payload: Any = None,
            **options: Any,
        ) -> EnqueueResult: ...
        def enqueue_many(self, jobs: Iterable[JobLike]) -> List[EnqueueResult]: ...
        def get(self, job_id: str, *, wait_ms: Optional[int] = None) -> Job: ...
        def list_jobs(
            self,
            *,
            queue: Optional[str] = None,
            state: Optional[str] = None,
            worker: Optional[str] = None,
            cursor: Optional[str] = None,
            limit: Optional[int] = None,
        ) -> JobPage: ...
        def cancel(self, job_id: str) -> Job: ...
        def retry(self, job_id: str) -> Job: ...
        def delete(self, job_id: str) -> None: ...
        def fetch(
            self,
            queues: Sequence[str],
            *,
            max: int = 1,
            wait_ms: int = 0,
            lease_ms: Optional[int] = None,
            worker: Optional[str] = None,
            consumer_group: Optional[str] = None,
            group: Optional[str] = None,
            runs: bool = False,
            max_groups: Optional[int] = None,
        ) -> List[Job]: ...
        def ack(self, job_id: str, token: int, result: Any = None) -> ItemResult: ...
        def fail(
            self,
            job_id: str,
            token: int,
            error: str,
            *,
            no_retry: bool = False,
            retry_after_ms: Optional[int] = None,
        ) -> ItemResult: ...
        def extend(self, job_id: str, token: int, lease_ms: Optional[int] = None) -> ItemResult: ...
        def progress(self, job_id: str, token: int, progress: Any) -> ItemResult: ...
        def release(self, job_id: str, token: int) -> ItemResult: ...
        def ack_many(self, items: Iterable[Dict[str, Any]]) -> List[ItemResult]: ...
        def fail_many(self, items: Iterable[Dict[str, Any]]) -> List[ItemResult]: ...
        def extend_many(self, items: Iterable[Dict[str, Any]]) -> List[ItemResult]: ...
        def release_many(self, items: Iterable[Dict[str, Any]]) -> List[ItemResult]: ...
        def queues(self) -> List[Queue]: ...
        def queue(self, name: str) -> Queue: ...
        def pause(self, name: str) -> Queue: ...
        def resume(self, name: str) -> Queue: ...
        def purge(self, name: str) -> int: ...
        def retry_jobs(self, name: str, state: str) -> int: ...
        def delete_jobs(self, name: str, state: str) -> int: ...
        def set_durability(self, name: str, durability: str) -> Queue: ...
        def set_limits(self, name: str, limits: Dict[str, Any]) -> Queue: ...
        def update_limits(self, name: str, patch: Dict[str, Any]) -> Queue: ...
        def clear_limits(self, name: str) -> Queue: ...
        def set_settings(self, name: str, settings: Dict[str, Any]) -> Queue: ...
        def update_settings(self, name: str, patch: Dict[str, Any]) -> Queue: ...
        def clear_settings(self, name: str) -> Queue: ...
        def put_schedule(
            self,
            name: str,
            job: JobLike,
            *,
            cron: Optional[str] = None,
            timezone: Optional[str] = None,
            every_ms: Optional[int] = None,
            misfire: Optional[str] = None,
            max_catch_up: Optional[int] = None,
            paused: Optional[bool] = None,
        ) -> Dict[str, Any]: ...
        def schedule(self, name: str) -> Dict[str, Any]: ...
        def schedules(self) -> List[Dict[str, Any]]: ...
        def delete_schedule(self, name: str) -> None: ...
        def pause_schedule(self, name: str) -> Dict[str, Any]: ...
        def resume_schedule(self, name: str) -> Dict[str, Any]: ...
        def trigger_schedule(self, name: str) -> Dict[str, Any]: ...
        def put_consumer_group(
            self,
            queue: str,
            group: str,
            *,
            start: Optional[str] = None,
            from_time: Optional[Any] = None,
        ) -> Dict[str, Any]: ...
        def consumer_group(self, queue: str, group: str) -> Dict[str, Any]: ...
        def consumer_groups(self, queue: str) -> List[Dict[str, Any]]: ...
        def delete_consumer_group(self, queue: str, group: str) -> None: ...
        def seek_consumer_group(
            self,
            queue: str,
            group: str,
            *,
            start: Optional[str] = None,
            from_time: Optional[Any] = None,
        ) -> Dict[str, Any]: ...
        def workers(self) -> List[Dict[str, Any]]: ...

    def __init__(self, url: Optional[str] = None, *, token: Optional[str] = None,
                 timeout: float = 30.0, retries: int = 3,
                 http: Optional[httpx.Client] = None) -> None:
        super().__init__(url, token=token, timeout=timeout, retries=retries)
        self._http = http or httpx.Client()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _do(self, call: _Call) -> Any:
        attempt = 0
        while True:
            try:
                resp = self._http.request(
                    call.method, self.url + call.path, params=call.params,
                    json=call.body, headers=self._headers, timeout=self._timeout(call))
            except httpx.TransportError as e:
                if call.idempotent and attempt < self.retries:
                    time.sleep(self._delay(attempt))
                    attempt += 1
                    continue
                raise TransportError(str(e) or type(e).__name__) from e
            if resp.status_code in _RETRY_STATUSES and call.idempotent and attempt < self.retries:
                time.sleep(self._delay(attempt))
                attempt += 1
                continue
            return self._answer(call, resp)

    def await_job(self, job_id: str, timeout: Optional[float] = None) -> Job:
        """Waits until the job is completed, dead or cancelled and returns it; after
        ``timeout`` seconds (None: no limit) returns it as it is then."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = MAX_WAIT_MS
            if deadline is not None:
                wait = max(0, min(wait, int((deadline - time.monotonic()) * 1000)))
            job: Job = self.get(job_id, wait_ms=wait or None)
            if job.done or (deadline is not None and time.monotonic() >= deadline):
                return job

    def enqueue_and_wait(self, kind: Union[str, JobLike], payload: Any = None, *,
                         timeout: Optional[float] = None, **options: Any) -> Job:
        """Enqueues a job and waits for it to finish; returns the :class:`Job`."""
        res: EnqueueResult = self.enqueue(kind, payload, **options)
        return self.await_job(res.id, timeout)


