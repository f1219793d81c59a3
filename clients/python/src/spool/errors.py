"""Typed errors, one class per code of the protocol's error catalog.

Every error the server answers is raised as a subclass of :class:`SpoolError`
chosen by its ``code``; callers branch on the class (or on ``.code``), never
on the message.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Type


class SpoolError(Exception):
    """An error answered by the server (or, with status 0, by the transport).

    Attributes:
        code: the stable error code (``"lease_lost"``, ``"not_found"``, …).
        message: the server's human-readable message.
        field: the field at fault, when one is (``"jobs[2].queue"``).
        status: the HTTP status code (0 when no answer arrived).
    """

    code: str = "unknown"

    def __init__(
        self,
        message: str = "",
        *,
        code: Optional[str] = None,
        field: Optional[str] = None,
        status: int = 0,
    ) -> None:
        if code is not None:
            self.code = code
        self.message = message
        self.field = field
        self.status = status
        text = f"spool: {self.code}: {message}" if message else f"spool: {self.code}"
        if field:
            text += f" (field {field})"
        super().__init__(text)


class BadRequest(SpoolError):
    """``bad_request``: the request was not valid HTTP/1.1."""

    code = "bad_request"


class InvalidJSON(SpoolError):
    """``invalid_json``: the body was not valid JSON, had an unknown field, or a wrong type."""

    code = "invalid_json"


class InvalidArgument(SpoolError):
    """``invalid_argument``: a field's value is not allowed; ``field`` names it."""

    code = "invalid_argument"


class BatchTooLarge(SpoolError):
    """``batch_too_large``: more items in one call than the server allows."""

    code = "batch_too_large"


class Unauthorized(SpoolError):
    """``unauthorized``: credentials are missing or invalid."""

    code = "unauthorized"


class Forbidden(SpoolError):
    """``forbidden``: the credentials lack the role or namespace for the call.

    Also a call that changes something, sent by a browser from another site.
    """

    code = "forbidden"


class NotFound(SpoolError):
    """``not_found``: no such job, queue, schedule or route."""

    code = "not_found"


class MethodNotAllowed(SpoolError):
    """``method_not_allowed``: the route exists for other methods."""

    code = "method_not_allowed"


class HostNotAllowed(SpoolError):
    """``host_not_allowed``: the server does not answer to the URL's host name.

    Its operator lists the names it serves under with ``--allowed-hosts``.
    """

    code = "host_not_allowed"


class UpgradeRequired(SpoolError):
    """``upgrade_required``: the stream transport needs a connection upgrade."""

    code = "upgrade_required"


class IDTaken(SpoolError):
    """``id_taken``: the id belongs to a job of another queue; nothing was stored."""

    code = "id_taken"


class LeaseLost(SpoolError):
    """``lease_lost``: the fencing token is not current; nothing changed.

    Another worker may own the job now: drop the result.
    """

    code = "lease_lost"


class InvalidState(SpoolError):
    """``invalid_state``: the operation does not apply to the job's state."""

    code = "invalid_state"


class PayloadTooLarge(SpoolError):
    """``payload_too_large``: the body or one payload exceeds its limit."""

    code = "payload_too_large"


class HeadersTooLarge(SpoolError):
    """``headers_too_large``: the request's headers exceed what the server reads."""

    code = "headers_too_large"


class InternalError(SpoolError):
    """``internal_error``: a server fault; details are in the server's log."""

    code = "internal_error"


class Unavailable(SpoolError):
    """``unavailable``: the server is shutting down or cannot write now; retry."""

    code = "unavailable"


class StorageFull(SpoolError):
    """``storage_full``: the disk is full; nothing was stored; retry later."""

    code = "storage_full"


class TransportError(SpoolError):
    """No answer from the server: connection refused, reset or timed out."""

    code = "transport"


ERRORS_BY_CODE: Dict[str, Type[SpoolError]] = {
    cls.code: cls
    for cls in (
        BadRequest,
        InvalidJSON,
        InvalidArgument,
        BatchTooLarge,
        Unauthorized,
        Forbidden,
        NotFound,
        MethodNotAllowed,
        HostNotAllowed,
        UpgradeRequired,
        IDTaken,
        LeaseLost,
        InvalidState,
        PayloadTooLarge,
        HeadersTooLarge,
        InternalError,
        Unavailable,
        StorageFull,
    )
}


def error_from_body(status: int, body: Any) -> SpoolError:
    """Builds the typed error for an error answer's status and decoded body."""
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict):
        return SpoolError(f"HTTP {status}", code="http_error", status=status)
    code = str(err.get("code", "http_error"))
    cls = ERRORS_BY_CODE.get(code, SpoolError)
    return cls(
        str(err.get("message", "")),
        code=code,
        field=err.get("field"),
        status=status,
    )


class NoRetry(Exception):
    """Raised by a handler (or wrapping its error) so that the job dies now.

    ``raise NoRetry("bad input")`` or ``raise NoRetry(err) from err``.
    """


class RetryAfter(Exception):
    """Raised by a handler so that the job is retried after ``seconds``
    instead of its backoff (when it has attempts left)."""

    def __init__(self, seconds: float, message: str = "") -> None:
        self.seconds = seconds
        super().__init__(message or f"retry after {seconds}s")
