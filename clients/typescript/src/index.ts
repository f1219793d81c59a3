// @spoolq/client: the TypeScript client and worker of Spool.

export * from "./types.js";
export * from "./errors.js";
export { SpoolClient, DEFAULT_USER_AGENT, temporary } from "./client.js";
export type { ClientOptions, CallOptions, GetJobOptions, AwaitOptions, ItemResult } from "./client.js";
export {
  Worker,
  NoRetryError,
  RetryAfterError,
  JobCancelledError,
  WorkerStoppedError,
  noRetry,
  retryAfter,
  SETTLE_DELAY_MS,
} from "./worker.js";
export type { Handler, JobContext, WorkerOptions, Logger } from "./worker.js";
