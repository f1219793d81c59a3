// Errors the server answers, one class per code of the error catalog
// (docs/protocol.md, "Errors"). Branch on the class (instanceof) or on
// `code`, never on `message`.

import type { ErrorBody } from "./types.js";

/** Every error a Spool server answers: a whole call's 4xx/5xx answer, or one failed item of a batch call. */
export class SpoolError extends Error {
  /** The catalog code, such as "lease_lost"; empty when the answer had no Spool error body (from a proxy, say). */
  readonly code: string;
  /** The field at fault, such as "jobs[2].kind", when one is. */
  readonly field?: string;
  /** The HTTP status; for a failed batch item, the status the catalog gives its code. */
  readonly status: number;

  constructor(code: string, message: string, status: number, field?: string) {
    super(message ? (code ? `${code}: ${message}` : message) : code || `http ${status}`);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
    if (field !== undefined) this.field = field;
  }
}

/** `bad_request` (400): The request was not valid HTTP/1.1 (a proxy or a broken transport sent it so). */
export class BadRequestError extends SpoolError {}

/** `invalid_json` (400): The body was not valid JSON, had an unknown field, or a field had the wrong type. */
export class InvalidJSONError extends SpoolError {}

/** `invalid_argument` (400): A field's value is not allowed; `field` names it. */
export class InvalidArgumentError extends SpoolError {}

/** `batch_too_large` (400): More items in one call than the server allows. */
export class BatchTooLargeError extends SpoolError {}

/** `unauthorized` (401): Credentials are missing or invalid. */
export class UnauthorizedError extends SpoolError {}

/** `forbidden` (403): The credentials lack the role or namespace for the call (or a browser sent it from another site). */
export class ForbiddenError extends SpoolError {}

/** `not_found` (404): No such job, queue, schedule or route. */
export class NotFoundError extends SpoolError {}

/** `method_not_allowed` (405): The route exists for other methods. */
export class MethodNotAllowedError extends SpoolError {}

/** `host_not_allowed` (421): The server does not answer to the URL's host name; its operator lists the names it serves under with `--allowed-hosts`. */
export class HostNotAllowedError extends SpoolError {}

/** `upgrade_required` (426): The stream transport was asked for without its upgrade headers. */
export class UpgradeRequiredError extends SpoolError {}

/** `id_taken` (409): An enqueue named an id that belongs to a job of another queue; nothing was stored. */
export class IdTakenError extends SpoolError {}

/** `lease_lost` (409): The fencing token is not the job's current one, or the job is no longer active; nothing changed. Another worker may own the job now: drop the result. */
export class LeaseLostError extends SpoolError {}

/** `invalid_state` (409): The operation does not apply to the job's current state; nothing changed. */
export class InvalidStateError extends SpoolError {}

/** `payload_too_large` (413): The body or one payload, result or progress report exceeds its limit. */
export class PayloadTooLargeError extends SpoolError {}

/** `headers_too_large` (431): The request's headers exceed what the server reads. */
export class HeadersTooLargeError extends SpoolError {}

/** `internal_error` (500): A server fault. */
export class InternalError extends SpoolError {}

/** `unavailable` (503): The server is shutting down or cannot write now; retry. */
export class UnavailableError extends SpoolError {}

/** `storage_full` (507): The server's disk is full and nothing of the call was stored; retry later. */
export class StorageFullError extends SpoolError {}

/** Each catalog code with its class and HTTP status. */
export const ERROR_CODES: Readonly<Record<string, { status: number; cls: new (code: string, message: string, status: number, field?: string) => SpoolError }>> = {
  bad_request: { status: 400, cls: BadRequestError },
  invalid_json: { status: 400, cls: InvalidJSONError },
  invalid_argument: { status: 400, cls: InvalidArgumentError },
  batch_too_large: { status: 400, cls: BatchTooLargeError },
  unauthorized: { status: 401, cls: UnauthorizedError },
  forbidden: { status: 403, cls: ForbiddenError },
  not_found: { status: 404, cls: NotFoundError },
  method_not_allowed: { status: 405, cls: MethodNotAllowedError },
  host_not_allowed: { status: 421, cls: HostNotAllowedError },
  upgrade_required: { status: 426, cls: UpgradeRequiredError },
  id_taken: { status: 409, cls: IdTakenError },
  lease_lost: { status: 409, cls: LeaseLostError },
  invalid_state: { status: 409, cls: InvalidStateError },
  payload_too_large: { status: 413, cls: PayloadTooLargeError },
  headers_too_large: { status: 431, cls: HeadersTooLargeError },
  internal_error: { status: 500, cls: InternalError },
  unavailable: { status: 503, cls: UnavailableError },
  storage_full: { status: 507, cls: StorageFullError },
};

/** Builds the error of an answer's status and error body. */
export function errorFrom(status: number, body: ErrorBody | undefined, fallbackMessage = ""): SpoolError {
  if (body && typeof body.code === "string" && body.code !== "") {
    const entry = ERROR_CODES[body.code];
    const cls = entry ? entry.cls : SpoolError;
    return new cls(body.code, body.message ?? "", status, body.field);
  }
  return new SpoolError("", fallbackMessage, status);
}

/** Builds the error of one failed item of a batch call, whose status is the catalog's for its code. */
export function itemError(body: ErrorBody): SpoolError {
  return errorFrom(ERROR_CODES[body.code]?.status ?? 0, body);
}
