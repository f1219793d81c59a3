// Types of the wire protocol (docs/protocol.md, api/openapi.json). Field
// names are those of the wire, so a value can be sent and read as it is.

/** Any JSON value: payloads, results and progress reports. */
export type JSONValue = null | boolean | number | string | JSONValue[] | { [key: string]: JSONValue };

/** Where a job stands. `completed`, `dead` and `cancelled` are final. */
export type JobState = "scheduled" | "available" | "active" | "retrying" | "completed" | "dead" | "cancelled";

/** The final states: a job in one of them never changes again by itself. */
export const FINAL_STATES: readonly JobState[] = ["completed", "dead", "cancelled"];

/** Reports whether state is final (completed, dead or cancelled). */
export function isFinal(state: JobState): boolean {
  return FINAL_STATES.includes(state);
}

/** The level a job is kept at (see Durability levels). */
export type Durability = "full" | "process" | "memory";

/** A job's retry policy. */
export interface Backoff {
  type: "fixed" | "exponential";
  base_ms: number;
  max_ms: number;
  jitter: number;
}

/** A job's retry policy at enqueue: every field may be left out. */
export type BackoffRequest = Partial<Backoff>;

/** The current lease of an active job. */
export interface Lease {
  /** The fencing token: every ack, fail, extend, progress and release carries it. */
  token: number;
  expires_at: string;
}

/** One failed attempt. */
export interface AttemptError {
  attempt: number;
  message: string;
  at: string;
}

/** One unit of work and everything the server knows about it. */
export interface Job {
  id: string;
  queue: string;
  kind: string;
  payload?: JSONValue;
  priority: number;
  state: JobState;
  run_at: string;
  attempt: number;
  max_attempts: number;
  backoff: Backoff;
  lease_ms: number;
  durability: Durability;
  unique_key?: string;
  unique_for_ms?: number;
  tags?: string[];
  group?: string;
  traceparent?: string;
  result?: JSONValue;
  /** One entry per failed attempt, oldest first: the first and the latest 20, within 256 KiB of messages. */
  errors?: AttemptError[];
  /** How many errors the server dropped from the history, between errors[0] and errors[1]; absent when none. */
  errors_dropped?: number;
  progress?: JSONValue;
  lease?: Lease;
  worker?: string;
  cancel_requested?: boolean;
  created_at: string;
  started_at?: string;
  finished_at?: string;
  dead_letter_of?: { queue: string; id: string };
  consumer_group?: string;
}

/**
 * Every property of Job, as api/openapi.json's Job schema lists them. The
 * tests compare this list with the document, so a field the server gains is
 * noticed here.
 */
export const JOB_FIELDS = [
  "id",
  "queue",
  "kind",
  "payload",
  "priority",
  "state",
  "run_at",
  "attempt",
  "max_attempts",
  "backoff",
  "lease_ms",
  "durability",
  "unique_key",
  "unique_for_ms",
  "tags",
  "group",
  "traceparent",
  "result",
  "errors",
  "errors_dropped",
  "progress",
  "lease",
  "worker",
  "cancel_requested",
  "created_at",
  "started_at",
  "finished_at",
  "dead_letter_of",
  "consumer_group",
] as const satisfies readonly (keyof Job)[];

/** A job to enqueue (`POST /v1/jobs`). Only `kind` is required. */
export interface EnqueueRequest {
  /** The job's id; an id already in the queue makes the enqueue a no-op (idempotent enqueue). */
  id?: string;
  /** Defaults to "default". */
  queue?: string;
  kind: string;
  payload?: JSONValue;
  /** −1000…1000; higher runs first. */
  priority?: number;
  /** When the job becomes available, as an RFC 3339 time or a Date. Not together with delay_ms. */
  run_at?: string | Date;
  /** 0…31,536,000,000 ms. */
  delay_ms?: number;
  /** 1…1000. */
  max_attempts?: number;
  backoff?: BackoffRequest;
  /** 100…86,400,000: how long a fetch leases the job. */
  lease_ms?: number;
  unique_key?: string;
  unique_for_ms?: number;
  tags?: string[];
  /** The job's group (a tenant, customer or entity): flow control deals round-robin over groups, and an ordered queue runs each group's jobs in order. */
  group?: string;
  durability?: Durability;
  /** A W3C traceparent. */
  traceparent?: string;
}

/** The answer to an enqueue. */
export interface EnqueueResult {
  id: string;
  state: JobState;
  duplicate: boolean;
}

/** Asks for jobs to work on (`POST /v1/fetch`). */
export interface FetchRequest {
  queues: string[];
  /** 1…1000; defaults to 1. */
  max?: number;
  /** 0…60000: long poll. */
  wait_ms?: number;
  lease_ms?: number;
  /** Free text shown as the jobs' `worker`. */
  worker?: string;
  consumer_group?: string;
  group?: string;
  /**
   * A free group of an ordered queue may give several of its jobs, a run,
   * in enqueue order (`max` is shared across groups). Handle a run's jobs
   * one after another and stop at the first that fails or is released: the
   * server has put the rest of the run back already. Sent only when true.
   */
  runs?: boolean;
  /**
   * 1…1000: take the jobs of at most this many groups of each queue; with
   * `runs`, 1 takes one group's run, whichever group. Default: any number.
   */
  max_groups?: number;
}

export interface AckResult {
  id: string;
  state: "completed" | "cancelled";
}

export interface FailOptions {
  /** Dead at once, whatever attempts are left. */
  no_retry?: boolean;
  /** Retry after this delay instead of the job's backoff. */
  retry_after_ms?: number;
}

export interface FailResult {
  id: string;
  state: "retrying" | "dead" | "cancelled";
  run_at?: string;
}

export interface ExtendResult {
  id: string;
  lease_expires_at: string;
  cancel_requested: boolean;
}

export interface ReleaseResult {
  id: string;
  state: "available" | "cancelled";
}

export interface AckItem {
  id: string;
  token: number;
  result?: JSONValue;
}

export interface FailItem extends FailOptions {
  id: string;
  token: number;
  error: string;
}

export interface ExtendItem {
  id: string;
  token: number;
  lease_ms?: number;
}

export interface ReleaseItem {
  id: string;
  token: number;
}

/** The body of an error answer, and of a failed batch item. */
export interface ErrorBody {
  code: string;
  message: string;
  field?: string;
}

/** Listing filters of `GET /v1/jobs`. */
export interface ListJobsParams {
  queue?: string;
  state?: JobState;
  consumer_group?: string;
  /** With state "active": the jobs this worker holds. */
  worker?: string;
  cursor?: string;
  /** 1…1000; defaults to 100. */
  limit?: number;
}

export interface JobList {
  jobs: Job[];
  next_cursor?: string;
}

export interface QueueCounts {
  scheduled: number;
  available: number;
  active: number;
  retrying: number;
  completed: number;
  dead: number;
  cancelled: number;
}

export interface Rate {
  limit: number;
  period_ms: number;
}

/** A queue's flow control (`PUT /v1/queues/{name}/limits`). */
export interface Limits {
  rate?: Rate;
  max_active?: number;
  group_rate?: Rate;
  group_max_active?: number;
  ordered?: boolean;
}

/** A queue's settings (`PUT /v1/queues/{name}/settings`). */
export interface QueueSettings {
  dead_letter_queue?: string;
  max_wait_ms?: number;
  default_lease_ms?: number;
  default_max_attempts?: number;
  default_delay_ms?: number;
}

/** A merge patch of a rate: a member with a number sets it, `null` clears it, one left out stays as it is. */
export interface RatePatch {
  limit?: number | null;
  period_ms?: number | null;
}

/**
 * A merge patch of a queue's limits (`PATCH /v1/queues/{name}/limits`, RFC 7396):
 * a field with a value sets it, `null` removes that limit, a field left out stays
 * as it is; a rate object is merged member by member and must come out whole.
 */
export interface LimitsPatch {
  rate?: RatePatch | null;
  max_active?: number | null;
  group_rate?: RatePatch | null;
  group_max_active?: number | null;
  ordered?: boolean | null;
}

/**
 * A merge patch of a queue's settings (`PATCH /v1/queues/{name}/settings`, RFC 7396):
 * a field with a value sets it, `null` clears it, a field left out stays as it is.
 */
export interface QueueSettingsPatch {
  dead_letter_queue?: string | null;
  max_wait_ms?: number | null;
  default_lease_ms?: number | null;
  default_max_attempts?: number | null;
  default_delay_ms?: number | null;
}

export interface Queue {
  name: string;
  paused: boolean;
  durability: Durability;
  counts: QueueCounts;
  limits?: Limits;
  settings?: QueueSettings;
}

/** What a schedule does about missed ticks. */
export type Misfire = "skip" | "run_once" | "catch_up";

/** The job a schedule enqueues at each tick: an enqueue without `id` and `run_at`. */
export type ScheduleJob = Omit<EnqueueRequest, "id" | "run_at">;

/** A schedule's definition (`PUT /v1/schedules/{name}`): exactly one of `cron` and `every_ms`. */
export interface ScheduleRequest {
  job: ScheduleJob;
  cron?: string;
  /** An IANA time zone; only with `cron`. Default "UTC". */
  timezone?: string;
  /** 1000…31,622,400,000. */
  every_ms?: number;
  misfire?: Misfire;
  max_catch_up?: number;
  paused?: boolean;
}

export interface Schedule {
  name: string;
  cron?: string;
  timezone?: string;
  every_ms?: number;
  misfire: Misfire;
  max_catch_up: number;
  job: ScheduleJob;
  paused: boolean;
  created_at: string;
  updated_at: string;
  next_run_at?: string;
  last_run_at?: string;
  last_job_id?: string;
}

export interface ScheduleTrigger {
  job: EnqueueResult;
  schedule: Schedule;
}

/** Where a consumer group starts (or a seek moves it). */
export interface ConsumerGroupStart {
  start?: "beginning" | "new" | "time";
  /** With start "time": an RFC 3339 time or a Date. */
  from?: string | Date;
}

export interface ConsumerGroup {
  queue: string;
  name: string;
  created_at: string;
  counts: QueueCounts;
  pending: number;
  oldest_pending_at?: string;
  lag_ms: number;
  /** After a seek: how many copies it made, one for each job of the queue the server still holds from the start named, finished ones included. */
  replayed?: number;
}

/** A transaction (`POST /v1/transactions`): acks, fails and enqueues, all or nothing. */
export interface TransactionRequest {
  ack?: AckItem[];
  fail?: FailItem[];
  enqueue?: EnqueueRequest[];
}

export interface TransactionResult {
  acked: AckResult[];
  failed: FailResult[];
  jobs: EnqueueResult[];
}

/** A worker as `GET /v1/workers` lists it. */
export interface WorkerInfo {
  name: string;
  first_seen_at: string;
  last_seen_at: string;
  active: number;
}
