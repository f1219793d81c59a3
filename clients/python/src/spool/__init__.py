"""Python client and worker for Spool, the durable background job queue.

>>> from spool import Client
>>> Client("http://127.0.0.1:7311").enqueue("send_email", {"to": "a@example.com"})
"""

from .client import DEFAULT_URL, AsyncClient, Client
from .errors import (
    BadRequest,
    BatchTooLarge,
    Forbidden,
    HeadersTooLarge,
    HostNotAllowed,
    IDTaken,
    InternalError,
    InvalidArgument,
    InvalidJSON,
    InvalidState,
    LeaseLost,
    MethodNotAllowed,
    NoRetry,
    NotFound,
    PayloadTooLarge,
    RetryAfter,
    SpoolError,
    StorageFull,
    TransportError,
    Unauthorized,
    Unavailable,
    UpgradeRequired,
)
from .models import (
    JOB_FIELDS,
    AttemptError,
    Backoff,
    EnqueueResult,
    ItemResult,
    Job,
    JobPage,
    JobSpec,
    Lease,
    Queue,
)
from .worker import SETTLE_DELAY, JobContext, Worker, current_job

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_URL", "AsyncClient", "Client", "Worker", "JobContext", "current_job", "SETTLE_DELAY",
    "Job", "JobSpec", "JobPage", "Lease", "Backoff", "AttemptError", "EnqueueResult",
    "ItemResult", "Queue", "JOB_FIELDS",
    "SpoolError", "BadRequest", "InvalidJSON", "InvalidArgument", "BatchTooLarge",
    "Unauthorized", "Forbidden", "NotFound", "MethodNotAllowed", "HostNotAllowed", "UpgradeRequired",
    "IDTaken", "LeaseLost", "InvalidState", "PayloadTooLarge", "HeadersTooLarge",
    "InternalError", "Unavailable", "StorageFull", "TransportError", "NoRetry", "RetryAfter",
]
