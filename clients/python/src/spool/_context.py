"""The job a handler runs, for code it calls (kept apart to avoid import cycles)."""

from __future__ import annotations

import contextvars
from typing import Any, Optional

#: The JobContext of the handler running in this context, if any.
current: "contextvars.ContextVar[Optional[Any]]" = contextvars.ContextVar("spool_job", default=None)


def traceparent() -> Optional[str]:
    """The traceparent of the job whose handler runs in this context, if any."""
    ctx = current.get()
    return getattr(ctx, "traceparent", None) if ctx is not None else None
