"""Request and answer models shared by the sync and async clients."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Union

_FRACTION = re.compile(r"\.(\d+)")


def parse_time(value: Optional[str]) -> Optional[datetime]:
    """Parses an RFC 3339 time of the wire (up to nanoseconds) into an aware datetime."""
    if value is None:
        return None
    if _FROMISOFORMAT_RFC3339:
        try:
            return _fromisoformat(value)
        except ValueError:
            pass
    text = value.replace("Z", "+00:00").replace("z", "+00:00")
    text = _FRACTION.sub(lambda m: "." + (m.group(1) + "000000")[:6], text, count=1)
    return datetime.fromisoformat(text)


def _fromisoformat_reads_rfc3339() -> bool:
    """Whether datetime.fromisoformat reads the wire's times as they are (Python
    3.11 and later: a "Z" offset and up to nine digits of fraction, truncated)."""
    try:
        t = datetime.fromisoformat("2000-01-02T03:04:05.123456789Z")
    except ValueError:
        return False
    return t.microsecond == 123456 and t.utcoffset() is not None and not t.utcoffset()


_FROMISOFORMAT_RFC3339 = _fromisoformat_reads_rfc3339()
_fromisoformat = datetime.fromisoformat


def format_time(value: Union[datetime, str]) -> str:
    """Formats a datetime as RFC 3339 in UTC (naive datetimes are taken as UTC)."""
    if isinstance(value, str):
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


@dataclass
class Backoff:
    """How long a failed job waits before its next attempt."""

    type: str = "exponential"
    base_ms: Optional[int] = None
    max_ms: Optional[int] = None
    jitter: Optional[float] = None

    def to_dict(self) -> Dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Backoff":
        return cls(type=d.get("type", "exponential"), base_ms=d.get("base_ms"),
                   max_ms=d.get("max_ms"), jitter=d.get("jitter"))


@dataclass
class Lease:
    """The lease of an active job: its fencing token and expiry."""

    token: int
    expires_at: Optional[datetime] = None


@dataclass
class AttemptError:
    """The error recorded for one failed attempt."""

    attempt: int
    message: str
    at: Optional[datetime] = None


@dataclass
class Job:
    """One job as the server shows it. Fields the server leaves out are None.

    ``extra`` keeps fields of newer servers that this client does not know.
    """

    id: str
    queue: str
    kind: str
    state: str
    payload: Any = None
    priority: int = 0
    run_at: Optional[datetime] = None
    attempt: int = 0
    max_attempts: int = 0
    backoff: Optional[Backoff] = None
    lease_ms: int = 0
    durability: str = "full"
    unique_key: Optional[str] = None
    unique_for_ms: Optional[int] = None
    tags: List[str] = field(default_factory=list)
    group: Optional[str] = None
    traceparent: Optional[str] = None
    result: Any = None
    #: One entry per failed attempt, oldest first: the first and the latest 20,
    #: within 256 KiB of messages.
    errors: List[AttemptError] = field(default_factory=list)
    #: How many errors the server dropped from the history, between
    #: ``errors[0]`` and ``errors[1]``.
    errors_dropped: int = 0
    progress: Any = None
    lease: Optional[Lease] = None
    worker: Optional[str] = None
    cancel_requested: bool = False
    created_at: Optional[datetime] = None
    started_at: Optional[datetime] = None
    finished_at: Optional[datetime] = None
    dead_letter_of: Optional[Dict[str, str]] = None
    consumer_group: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def token(self) -> Optional[int]:
        """The fencing token of the job's current lease (None when not active)."""
        return self.lease.token if self.lease else None

    @property
    def done(self) -> bool:
        """Whether the job is final: completed, dead or cancelled."""
        return self.state in ("completed", "dead", "cancelled")

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Job":
        # Filled in directly rather than through __init__: a worker decodes
        # every job it fetches, and this is most of what that costs.
        get = d.get
        lease = get("lease")
        backoff = get("backoff")
        errors = get("errors")
        job = cls.__new__(cls)
        job.__dict__.update(
            id=d["id"],
            queue=d["queue"],
            kind=d["kind"],
            state=d["state"],
            payload=get("payload"),
            priority=get("priority", 0),
            run_at=parse_time(get("run_at")),
            attempt=get("attempt", 0),
            max_attempts=get("max_attempts", 0),
            backoff=Backoff(backoff.get("type", "exponential"), backoff.get("base_ms"), backoff.get("max_ms"),
                            backoff.get("jitter")) if backoff else None,
            lease_ms=get("lease_ms", 0),
            durability=get("durability", "full"),
            unique_key=get("unique_key"),
            unique_for_ms=get("unique_for_ms"),
            tags=list(get("tags") or ()),
            group=get("group"),
            traceparent=get("traceparent"),
            result=get("result"),
            errors=[AttemptError(e.get("attempt", 0), e.get("message", ""), parse_time(e.get("at")))
                    for e in errors] if errors else [],
            errors_dropped=get("errors_dropped", 0),
            progress=get("progress"),
            lease=Lease(lease["token"], parse_time(lease.get("expires_at"))) if lease else None,
            worker=get("worker"),
            cancel_requested=bool(get("cancel_requested", False)),
            created_at=parse_time(get("created_at")),
            started_at=parse_time(get("started_at")),
            finished_at=parse_time(get("finished_at")),
            dead_letter_of=get("dead_letter_of"),
            consumer_group=get("consumer_group"),
            extra={} if d.keys() <= JOB_FIELDS else {k: v for k, v in d.items() if k not in JOB_FIELDS},
        )
        return job


#: The wire names of the fields of a job this client knows.
JOB_FIELDS = frozenset(f.name for f in dataclasses.fields(Job) if f.name != "extra")


@dataclass
class JobSpec:
    """A job to enqueue, with every option of ``POST /v1/jobs``.

    Options left None take the server's (or the queue's) defaults. ``run_at``
    and ``delay_ms`` are exclusive.
    """

    kind: str
    payload: Any = None
    queue: Optional[str] = None
    id: Optional[str] = None
    priority: Optional[int] = None
    delay_ms: Optional[int] = None
    run_at: Optional[Union[datetime, str]] = None
    max_attempts: Optional[int] = None
    backoff: Optional[Union[Backoff, Dict[str, Any]]] = None
    lease_ms: Optional[int] = None
    unique_key: Optional[str] = None
    unique_for_ms: Optional[int] = None
    tags: Optional[List[str]] = None
    group: Optional[str] = None
    durability: Optional[str] = None
    traceparent: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        body: Dict[str, Any] = {"kind": self.kind}
        if self.payload is not None:
            body["payload"] = self.payload
        for name in ("queue", "id", "priority", "delay_ms", "max_attempts", "lease_ms",
                     "unique_key", "unique_for_ms", "tags", "group", "durability", "traceparent"):
            value = getattr(self, name)
            if value is not None:
                body[name] = value
        if self.run_at is not None:
            body["run_at"] = format_time(self.run_at)
        if self.backoff is not None:
            body["backoff"] = self.backoff.to_dict() if isinstance(self.backoff, Backoff) else dict(self.backoff)
        return body


@dataclass
class EnqueueResult:
    """The answer to an enqueue: the job's id and state, and whether it was a duplicate."""

    id: str
    state: str
    duplicate: bool = False

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "EnqueueResult":
        return cls(d["id"], d["state"], bool(d.get("duplicate", False)))


@dataclass
class JobPage:
    """One page of ``GET /v1/jobs``; pass ``next_cursor`` back for the next."""

    jobs: List[Job]
    next_cursor: Optional[str] = None


@dataclass
class Queue:
    """A queue: its pause, durability, counts by state, limits and settings."""

    name: str
    paused: bool = False
    durability: str = "full"
    counts: Dict[str, int] = field(default_factory=dict)
    limits: Optional[Dict[str, Any]] = None
    settings: Optional[Dict[str, Any]] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Queue":
        return cls(d["name"], bool(d.get("paused", False)), d.get("durability", "full"),
                   dict(d.get("counts") or {}), d.get("limits"), d.get("settings"))


@dataclass
class ItemResult:
    """One item's outcome in a batch ack, fail, extend or release.

    ``error`` is set (a typed :class:`~spool.errors.SpoolError`) when the item failed.
    """

    id: str
    state: Optional[str] = None
    run_at: Optional[datetime] = None
    lease_expires_at: Optional[datetime] = None
    cancel_requested: bool = False
    error: Optional[Exception] = None
