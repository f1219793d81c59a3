// The client of Spool's HTTP API (docs/protocol.md) for producers, workers
// and admins. It needs nothing but the platform's fetch and AbortController.

import { SpoolError, errorFrom, itemError } from "./errors.js";
import { StreamClient, StreamRefusedError, UNKNOWN_STREAM, streamable } from "./stream.js";
import type {
  AckItem,
  AckResult,
  ConsumerGroup,
  ConsumerGroupStart,
  Durability,
  EnqueueRequest,
  EnqueueResult,
  ErrorBody,
  ExtendItem,
  ExtendResult,
  FailItem,
  FailOptions,
  FailResult,
  FetchRequest,
  Job,
  JobList,
  JobState,
  JSONValue,
  Limits,
  LimitsPatch,
  ListJobsParams,
  Queue,
  QueueSettings,
  QueueSettingsPatch,
  ReleaseItem,
  ReleaseResult,
  Schedule,
  ScheduleRequest,
  ScheduleTrigger,
  TransactionRequest,
  TransactionResult,
  WorkerInfo,
} from "./types.js";
import { isFinal } from "./types.js";

/** The User-Agent a client sends unless ClientOptions.userAgent sets another. */
export const DEFAULT_USER_AGENT = "spool-typescript-client/0.1";

/** Options of a SpoolClient. */
export interface ClientOptions {
  /** Sent as "Authorization: Bearer <token>" with every call. */
  token?: string;
  /**
   * Bounds each request (default 30 s). A long poll (a fetch's or a get's
   * `wait_ms`) gets its wait on top, so a timeout never cuts one short.
   */
  timeoutMs?: number;
  /**
   * How many times an idempotent call (a GET, an enqueue that names its
   * `id`) is tried again after a transport failure, a timeout or a 5xx or
   * 429 answer, with growing jittered pauses (default 3; 0 never retries).
   * Other calls are never retried: they could take effect twice.
   */
  retries?: number;
  /** Replaces DEFAULT_USER_AGENT, to tell callers apart in server logs. */
  userAgent?: string;
  /**
   * The fetch function to use; defaults to the global fetch. Given, the
   * client speaks HTTP through it, never the stream.
   */
  fetch?: typeof fetch;
}

/** Options of one call. */
export interface CallOptions {
  /** Aborts the call (and its retries). */
  signal?: AbortSignal;
  /** Replaces ClientOptions.timeoutMs for this call. */
  timeoutMs?: number;
}

/** Options of getJob. */
export interface GetJobOptions extends CallOptions {
  /**
   * 0…60000: the server holds the request until the job is final
   * (completed, dead or cancelled) or the wait ends, and answers the job as
   * it is then.
   */
  wait_ms?: number;
}

/** Options of awaitJob and enqueueAndWait. */
export interface AwaitOptions extends CallOptions {
  /** Gives up (rejects with a TimeoutError) after this long; default: wait as long as `signal` lets. */
  waitMs?: number;
}

/** The outcome of one item of a batch call: its answer, or its error. */
export type ItemResult<T> = T | SpoolError;

interface RequestOptions extends CallOptions {
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  /** The call may be sent again after a failure without changing its effect. */
  idempotent?: boolean;
  /** Added to the timeout: the server holds the request this long. */
  holdMs?: number;
}

interface Answer<T> {
  status: number;
  body: T;
}

/** The longest the server holds a long poll. */
const MAX_HOLD_MS = 60_000;
const RETRY_MIN_MS = 100;
const RETRY_MAX_MS = 5_000;

/**
 * Speaks Spool's HTTP API. One client per server is enough for a whole
 * program, and is safe to share.
 *
 * On Node, for an http:// URL that no proxy of the environment covers and
 * unless ClientOptions.fetch is given, the client sends its calls as frames
 * of one multiplexed connection, spool-stream/1 ("Stream transport" in
 * docs/protocol.md), which saves most of the per-call work of HTTP; the
 * calls, answers and errors are those of HTTP, and the connection keeps no
 * process alive while no call is in flight. Where the server or a proxy
 * refuses the upgrade as unknown the client speaks HTTP for good; a call
 * whose upgrade is refused for another reason (no token, a server stopping)
 * goes over HTTP. Elsewhere, and with ClientOptions.fetch, each call is one
 * HTTP request through fetch, which pools the connections.
 *
 * Errors the server answers are SpoolError subclasses, one per code of the
 * error catalog (InvalidArgumentError, NotFoundError, LeaseLostError, …);
 * transport failures and timeouts are the platform's errors.
 */
export class SpoolClient {
  readonly baseUrl: string;
  private readonly token?: string;
  private readonly timeoutMs: number;
  private readonly retries: number;
  private readonly userAgent: string;
  private readonly fetchFn: typeof fetch;
  private stream: StreamClient | undefined;

  /** A client of the server at baseUrl, such as "http://127.0.0.1:7311". */
  constructor(baseUrl: string, options: ClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.token = options.token;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.retries = options.retries ?? 3;
    this.userAgent = options.userAgent ?? DEFAULT_USER_AGENT;
    this.fetchFn = options.fetch ?? globalThis.fetch.bind(globalThis);
    if (options.fetch === undefined && streamable(this.baseUrl)) {
      const headers: Record<string, string> = { "User-Agent": this.userAgent };
      if (this.token) headers.Authorization = `Bearer ${this.token}`;
      this.stream = new StreamClient(this.baseUrl, headers);
    }
  }

  /** Closes the client's stream connection, if it has one; a later call opens another. */
  close(): void {
    this.stream?.close();
  }

  // ---- Producers -------------------------------------------------------

  /**
   * Enqueues one job (POST /v1/jobs). An enqueue naming an `id` is
   * idempotent (a second one answers the first job with `duplicate: true`)
   * and so is retried after transport failures.
   */
  async enqueue(job: EnqueueRequest, options: CallOptions = {}): Promise<EnqueueResult> {
    const { body } = await this.request<EnqueueResult>("POST", "/v1/jobs", {
      ...options,
      body: wireJob(job),
      idempotent: job.id !== undefined,
    });
    return body;
  }

  /**
   * Enqueues up to the server's batch limit of jobs atomically
   * (POST /v1/jobs/batch): all are stored or none. The answers come in
   * request order. Retried after transport failures when every job names
   * its `id`.
   */
  async enqueueMany(jobs: EnqueueRequest[], options: CallOptions = {}): Promise<EnqueueResult[]> {
    const { body } = await this.request<{ jobs: EnqueueResult[] }>("POST", "/v1/jobs/batch", {
      ...options,
      body: { jobs: jobs.map(wireJob) },
      idempotent: jobs.every((j) => j.id !== undefined),
    });
    return body.jobs;
  }

  /** Reads one job (GET /v1/jobs/{id}); with `wait_ms`, waits up to that long for it to be final. */
  async getJob(id: string, options: GetJobOptions = {}): Promise<Job> {
    const { body } = await this.request<Job>("GET", jobPath(id), {
      ...options,
      query: { wait_ms: options.wait_ms },
      idempotent: true,
      holdMs: options.wait_ms,
    });
    return body;
  }

  /**
   * Resolves with job id once it is final (completed, dead or cancelled).
   * Each request asks the server to hold it for up to a minute, then asks
   * again, so a wait costs a request a minute, not a poll. A job that does
   * not exist, or is deleted meanwhile, rejects with NotFoundError.
   */
  async awaitJob(id: string, options: AwaitOptions = {}): Promise<Job> {
    const deadline = options.waitMs !== undefined ? Date.now() + options.waitMs : Infinity;
    for (;;) {
      options.signal?.throwIfAborted();
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new DOMException(`awaiting job ${id}: no final state within ${options.waitMs} ms`, "TimeoutError");
      }
      const job = await this.getJob(id, {
        signal: options.signal,
        timeoutMs: options.timeoutMs,
        wait_ms: Math.max(1, Math.min(MAX_HOLD_MS, Math.ceil(left))),
      });
      if (isFinal(job.state)) return job;
    }
  }

  /**
   * Enqueues a job and resolves once it is final, with its `result` (or
   * its `errors` when it died). For a duplicate it waits for the existing
   * job.
   */
  async enqueueAndWait(job: EnqueueRequest, options: AwaitOptions = {}): Promise<Job> {
    const res = await this.enqueue(job, options);
    return this.awaitJob(res.id, options);
  }

  /** Lists jobs (GET /v1/jobs) in enqueue order, a page at a time; pass `next_cursor` back as `cursor`. */
  async listJobs(params: ListJobsParams = {}, options: CallOptions = {}): Promise<JobList> {
    const { body } = await this.request<JobList>("GET", "/v1/jobs", {
      ...options,
      query: { ...params },
      idempotent: true,
    });
    return body;
  }

  /** Iterates over every job a listing holds, page after page. */
  async *jobs(params: Omit<ListJobsParams, "cursor"> = {}, options: CallOptions = {}): AsyncGenerator<Job> {
    let cursor: string | undefined;
    do {
      const page = await this.listJobs({ ...params, cursor }, options);
      yield* page.jobs;
      cursor = page.next_cursor;
    } while (cursor);
  }

  /**
   * Cancels a job (POST /v1/jobs/{id}/cancel): at once unless it is
   * active, whose worker is asked to stop (`cancel_requested`) and which
   * ends cancelled when it hands the job back. A final job: InvalidStateError.
   */
  async cancelJob(id: string, options: CallOptions = {}): Promise<Job> {
    return (await this.request<Job>("POST", jobPath(id, "/cancel"), options)).body;
  }

  /** Makes a dead, cancelled, retrying or scheduled job available now with `attempt` 0 (POST /v1/jobs/{id}/retry). */
  async retryJob(id: string, options: CallOptions = {}): Promise<Job> {
    return (await this.request<Job>("POST", jobPath(id, "/retry"), options)).body;
  }

  /** Deletes a job that is not active (DELETE /v1/jobs/{id}). */
  async deleteJob(id: string, options: CallOptions = {}): Promise<void> {
    await this.request("DELETE", jobPath(id), options);
  }

  // ---- Workers ---------------------------------------------------------

  /** Leases up to `max` jobs (POST /v1/fetch); with `wait_ms` a long poll that may answer none. */
  async fetchJobs(req: FetchRequest, options: CallOptions = {}): Promise<Job[]> {
    const { runs, ...rest } = req;
    const { body } = await this.request<{ jobs: Job[] }>("POST", "/v1/fetch", {
      ...options,
      body: runs ? { ...rest, runs: true } : rest,
      holdMs: req.wait_ms,
    });
    return body.jobs;
  }

  /** Completes a job with its result (POST /v1/jobs/{id}/ack). A stale token: LeaseLostError. */
  async ack(id: string, token: number, result?: JSONValue, options: CallOptions = {}): Promise<AckResult> {
    const body: Record<string, unknown> = { token };
    if (result !== undefined) body.result = result;
    return (await this.request<AckResult>("POST", jobPath(id, "/ack"), { ...options, body })).body;
  }

  /** Fails an attempt (POST /v1/jobs/{id}/fail): the job retries after its backoff, or dies. */
  async fail(id: string, token: number, error: string, opts: FailOptions = {}, options: CallOptions = {}): Promise<FailResult> {
    const body = { token, error, ...dropUndefined(opts) };
    return (await this.request<FailResult>("POST", jobPath(id, "/fail"), { ...options, body })).body;
  }

  /** Extends a job's lease (POST /v1/jobs/{id}/extend); `cancel_requested` tells the worker to stop. */
  async extend(id: string, token: number, lease_ms?: number, options: CallOptions = {}): Promise<ExtendResult> {
    const body = dropUndefined({ token, lease_ms });
    return (await this.request<ExtendResult>("POST", jobPath(id, "/extend"), { ...options, body })).body;
  }

  /** Records a running job's progress (POST /v1/jobs/{id}/progress). */
  async progress(id: string, token: number, progress: JSONValue, options: CallOptions = {}): Promise<void> {
    await this.request("POST", jobPath(id, "/progress"), { ...options, body: { token, progress } });
  }

  /** Hands a job back unrun (POST /v1/jobs/{id}/release): available again, the attempt not counted. */
  async release(id: string, token: number, options: CallOptions = {}): Promise<ReleaseResult> {
    return (await this.request<ReleaseResult>("POST", jobPath(id, "/release"), { ...options, body: { token } })).body;
  }

  /** Acks many jobs in one call (POST /v1/jobs/ack); each item succeeds or fails on its own. */
  async ackMany(items: AckItem[], options: CallOptions = {}): Promise<ItemResult<AckResult>[]> {
    return this.batch<AckResult>("/v1/jobs/ack", items, options);
  }

  /** Fails many attempts in one call (POST /v1/jobs/fail). */
  async failMany(items: FailItem[], options: CallOptions = {}): Promise<ItemResult<FailResult>[]> {
    return this.batch<FailResult>("/v1/jobs/fail", items, options);
  }

  /** Extends many leases in one call (POST /v1/jobs/extend): a worker's heartbeat. */
  async extendMany(items: ExtendItem[], options: CallOptions = {}): Promise<ItemResult<ExtendResult>[]> {
    return this.batch<ExtendResult>("/v1/jobs/extend", items, options);
  }

  /** Releases many jobs in one call (POST /v1/jobs/release). */
  async releaseMany(items: ReleaseItem[], options: CallOptions = {}): Promise<ItemResult<ReleaseResult>[]> {
    return this.batch<ReleaseResult>("/v1/jobs/release", items, options);
  }

  // ---- Queues ----------------------------------------------------------

  /** Lists the queues with their counts (GET /v1/queues). */
  async listQueues(options: CallOptions = {}): Promise<Queue[]> {
    return (await this.request<{ queues: Queue[] }>("GET", "/v1/queues", { ...options, idempotent: true })).body.queues;
  }

  /** Reads one queue (GET /v1/queues/{name}). */
  async getQueue(name: string, options: CallOptions = {}): Promise<Queue> {
    return (await this.request<Queue>("GET", queuePath(name), { ...options, idempotent: true })).body;
  }

  /** Pauses a queue: it hands out nothing until resumed. */
  async pauseQueue(name: string, options: CallOptions = {}): Promise<Queue> {
    return (await this.request<Queue>("POST", queuePath(name, "/pause"), options)).body;
  }

  /** Resumes a paused queue. */
  async resumeQueue(name: string, options: CallOptions = {}): Promise<Queue> {
    return (await this.request<Queue>("POST", queuePath(name, "/resume"), options)).body;
  }

  /** Sets the durability of the jobs later enqueued into the queue without one of their own. */
  async setQueueDurability(name: string, durability: Durability, options: CallOptions = {}): Promise<Queue> {
    return (await this.request<Queue>("POST", queuePath(name, "/durability"), { ...options, body: { durability } })).body;
  }

  /** Replaces the queue's flow control (PUT /v1/queues/{name}/limits). */
  async setQueueLimits(name: string, limits: Limits, options: CallOptions = {}): Promise<Queue> {
    return (await this.request<Queue>("PUT", queuePath(name, "/limits"), { ...options, body: limits })).body;
  }

  /**
   * Changes the limits that `patch` names and keeps the others (PATCH
   * /v1/queues/{name}/limits): a value sets a limit, `null` removes it, a field
   * left out stays as it is. The server merges and writes in one transaction,
   * so updates of different fields made at once all take effect.
   */
  async updateQueueLimits(name: string, patch: LimitsPatch, options: CallOptions = {}): Promise<Queue> {
    return (await this.request<Queue>("PATCH", queuePath(name, "/limits"), { ...options, body: patch, idempotent: true })).body;
  }

  /** Removes the queue's flow control. */
  async deleteQueueLimits(name: string, options: CallOptions = {}): Promise<Queue> {
    return (await this.request<Queue>("DELETE", queuePath(name, "/limits"), options)).body;
  }

  /** Replaces the queue's settings (PUT /v1/queues/{name}/settings). */
  async setQueueSettings(name: string, settings: QueueSettings, options: CallOptions = {}): Promise<Queue> {
    return (await this.request<Queue>("PUT", queuePath(name, "/settings"), { ...options, body: settings })).body;
  }

  /**
   * Changes the settings that `patch` names and keeps the others (PATCH
   * /v1/queues/{name}/settings): a value sets a setting, `null` clears it, a
   * field left out stays as it is. The server merges and writes in one
   * transaction, so updates of different fields made at once all take effect.
   */
  async updateQueueSettings(name: string, patch: QueueSettingsPatch, options: CallOptions = {}): Promise<Queue> {
    return (await this.request<Queue>("PATCH", queuePath(name, "/settings"), { ...options, body: patch, idempotent: true })).body;
  }

  /** Clears the queue's settings. */
  async deleteQueueSettings(name: string, options: CallOptions = {}): Promise<Queue> {
    return (await this.request<Queue>("DELETE", queuePath(name, "/settings"), options)).body;
  }

  /** Deletes the queue's available jobs; resolves with how many. */
  async purgeQueue(name: string, options: CallOptions = {}): Promise<number> {
    return (await this.request<{ count: number }>("POST", queuePath(name, "/purge"), options)).body.count;
  }

  /** Retries every job of the queue in `state` (dead, cancelled, retrying or scheduled); resolves with how many. */
  async retryQueueJobs(name: string, state: JobState, options: CallOptions = {}): Promise<number> {
    return (await this.request<{ count: number }>("POST", queuePath(name, "/retry"), { ...options, body: { state } })).body.count;
  }

  /** Deletes every job of the queue in `state` (not active); resolves with how many. */
  async deleteQueueJobs(name: string, state: JobState, options: CallOptions = {}): Promise<number> {
    return (await this.request<{ count: number }>("POST", queuePath(name, "/delete"), { ...options, body: { state } })).body.count;
  }

  // ---- Transactions ----------------------------------------------------

  /**
   * Acks and fails leased jobs and enqueues new ones in one call, all or
   * nothing (POST /v1/transactions): a worker's follow-up jobs are never
   * lost nor doubled by a crash between its ack and its enqueue.
   */
  async transact(tx: TransactionRequest, options: CallOptions = {}): Promise<TransactionResult> {
    const body = { ...tx, ...(tx.enqueue ? { enqueue: tx.enqueue.map(wireJob) } : {}) };
    return (await this.request<TransactionResult>("POST", "/v1/transactions", { ...options, body })).body;
  }

  // ---- Consumer groups -------------------------------------------------

  /** Creates a consumer group of a queue (PUT /v1/queues/{name}/consumer-groups/{group}); an existing one is answered unchanged. */
  async createConsumerGroup(queue: string, group: string, start: ConsumerGroupStart = {}, options: CallOptions = {}): Promise<ConsumerGroup> {
    return (await this.request<ConsumerGroup>("PUT", queuePath(queue, "/consumer-groups/" + encodeURIComponent(group)), {
      ...options,
      body: wireStart(start),
      idempotent: true,
    })).body;
  }

  /** Lists a queue's consumer groups with their counts and lag. */
  async listConsumerGroups(queue: string, options: CallOptions = {}): Promise<ConsumerGroup[]> {
    return (await this.request<{ consumer_groups: ConsumerGroup[] }>("GET", queuePath(queue, "/consumer-groups"), { ...options, idempotent: true })).body
      .consumer_groups;
  }

  /** Reads one consumer group. */
  async getConsumerGroup(queue: string, group: string, options: CallOptions = {}): Promise<ConsumerGroup> {
    return (await this.request<ConsumerGroup>("GET", queuePath(queue, "/consumer-groups/" + encodeURIComponent(group)), { ...options, idempotent: true }))
      .body;
  }

  /** Starts a consumer group over from `start` (a replay, or a skip to new jobs). */
  async seekConsumerGroup(queue: string, group: string, start: ConsumerGroupStart, options: CallOptions = {}): Promise<ConsumerGroup> {
    return (await this.request<ConsumerGroup>("POST", queuePath(queue, "/consumer-groups/" + encodeURIComponent(group) + "/seek"), {
      ...options,
      body: wireStart(start),
    })).body;
  }

  /** Deletes a consumer group and every job it holds. */
  async deleteConsumerGroup(queue: string, group: string, options: CallOptions = {}): Promise<void> {
    await this.request("DELETE", queuePath(queue, "/consumer-groups/" + encodeURIComponent(group)), options);
  }

  // ---- Schedules -------------------------------------------------------

  /** Creates or replaces a schedule (PUT /v1/schedules/{name}). */
  async putSchedule(name: string, def: ScheduleRequest, options: CallOptions = {}): Promise<Schedule> {
    return (await this.request<Schedule>("PUT", schedulePath(name), { ...options, body: def, idempotent: true })).body;
  }

  /** Lists the schedules, sorted by name. */
  async listSchedules(options: CallOptions = {}): Promise<Schedule[]> {
    return (await this.request<{ schedules: Schedule[] }>("GET", "/v1/schedules", { ...options, idempotent: true })).body.schedules;
  }

  /** Reads one schedule. */
  async getSchedule(name: string, options: CallOptions = {}): Promise<Schedule> {
    return (await this.request<Schedule>("GET", schedulePath(name), { ...options, idempotent: true })).body;
  }

  /** Deletes a schedule; the jobs it enqueued stay. */
  async deleteSchedule(name: string, options: CallOptions = {}): Promise<void> {
    await this.request("DELETE", schedulePath(name), options);
  }

  /** Pauses a schedule: it fires nothing until resumed. */
  async pauseSchedule(name: string, options: CallOptions = {}): Promise<Schedule> {
    return (await this.request<Schedule>("POST", schedulePath(name, "/pause"), options)).body;
  }

  /** Resumes a paused schedule; its missed ticks meet its misfire policy. */
  async resumeSchedule(name: string, options: CallOptions = {}): Promise<Schedule> {
    return (await this.request<Schedule>("POST", schedulePath(name, "/resume"), options)).body;
  }

  /** Enqueues one job of the schedule's template now. */
  async triggerSchedule(name: string, options: CallOptions = {}): Promise<ScheduleTrigger> {
    return (await this.request<ScheduleTrigger>("POST", schedulePath(name, "/trigger"), options)).body;
  }

  // ---- Service ---------------------------------------------------------

  /** Lists the workers that fetch, with how many jobs each holds (GET /v1/workers). */
  async listWorkers(options: CallOptions = {}): Promise<WorkerInfo[]> {
    return (await this.request<{ workers: WorkerInfo[] }>("GET", "/v1/workers", { ...options, idempotent: true })).body.workers;
  }

  /** Resolves when the server process runs (GET /healthz). */
  async health(options: CallOptions = {}): Promise<void> {
    await this.request("GET", "/healthz", { ...options, idempotent: true });
  }

  /** Resolves when the server can serve (GET /readyz); UnavailableError when its store does not answer. */
  async ready(options: CallOptions = {}): Promise<void> {
    await this.request("GET", "/readyz", options);
  }

  // ---- Plumbing --------------------------------------------------------

  private async batch<T>(path: string, items: object[], options: CallOptions): Promise<ItemResult<T>[]> {
    const { body } = await this.request<{ results: (T | { id: string; error: ErrorBody })[] }>("POST", path, {
      ...options,
      body: { items },
    });
    return body.results.map((r) => {
      const e = (r as { error?: ErrorBody }).error;
      return e ? itemError(e) : (r as T);
    });
  }

  /**
   * Sends one request and decodes its answer. A 4xx/5xx answer rejects with
   * the SpoolError subclass of its code. Idempotent requests are retried
   * after transport failures, timeouts and 5xx/429 answers.
   */
  async request<T = unknown>(method: string, path: string, options: RequestOptions = {}): Promise<Answer<T>> {
    const retries = options.idempotent ? this.retries : 0;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.send<T>(method, path, options);
      } catch (err) {
        if (attempt >= retries || options.signal?.aborted || !temporary(err)) throw err;
      }
      const pause = Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** attempt);
      await sleep(pause / 2 + Math.random() * (pause / 2), options.signal);
    }
  }

  private async send<T>(method: string, path: string, options: RequestOptions): Promise<Answer<T>> {
    let url = this.baseUrl + path;
    if (options.query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(options.query)) {
        if (v !== undefined && v !== "") q.append(k, String(v));
      }
      const s = q.toString();
      if (s) url += "?" + s;
    }
    const headers: Record<string, string> = { Accept: "application/json", "User-Agent": this.userAgent };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    let payload: string | undefined;
    if (options.body !== undefined) {
      headers["Content-Type"] = "application/json";
      payload = JSON.stringify(options.body);
    }
    const timeout = (options.timeoutMs ?? this.timeoutMs) + (options.holdMs ?? 0);
    const { signal, dispose } = linkSignals(options.signal, timeout);
    try {
      let status = 0;
      let statusText = "";
      let text = "";
      const stream = this.stream;
      if (stream) {
        try {
          ({ status, body: text } = await stream.call(method, url.slice(this.baseUrl.length), payload, signal));
        } catch (err) {
          if (!(err instanceof StreamRefusedError)) throw err;
          if (UNKNOWN_STREAM.has(err.status)) {
            this.stream = undefined; // the server does not serve the stream: HTTP for good
            stream.close();
          }
          // This call goes over HTTP, and gets the answer HTTP gives.
        }
      }
      if (status === 0) {
        const res = await this.fetchFn(url, { method, headers, body: payload, signal });
        text = await res.text();
        status = res.status;
        statusText = res.statusText;
      }
      const res = { status, statusText };
      if (res.status >= 400) {
        let errBody: ErrorBody | undefined;
        try {
          errBody = (JSON.parse(text) as { error?: ErrorBody }).error;
        } catch {
          // not a Spool error body: a proxy's, say
        }
        const fallback = text.trim().slice(0, 200) || res.statusText || `http ${res.status}`;
        throw errorFrom(res.status, errBody, fallback);
      }
      const body = (text === "" ? undefined : JSON.parse(text)) as T;
      return { status: res.status, body };
    } finally {
      dispose();
    }
  }
}

/** Reports whether a call that failed with err may succeed when sent again unchanged. */
export function temporary(err: unknown): boolean {
  if (err instanceof SpoolError) return err.status >= 500 || err.status === 429;
  if (err instanceof DOMException) return err.name === "TimeoutError";
  // fetch rejects with a TypeError when the connection fails.
  return err instanceof TypeError;
}

/** The wire form of a job: run_at as an RFC 3339 string, no undefined fields. */
function wireJob(job: EnqueueRequest): Record<string, unknown> {
  const out = dropUndefined({ ...job }) as Record<string, unknown>;
  if (job.run_at instanceof Date) out.run_at = job.run_at.toISOString();
  return out;
}

function wireStart(start: ConsumerGroupStart): Record<string, unknown> {
  const out = dropUndefined({ ...start }) as Record<string, unknown>;
  if (start.from instanceof Date) out.from = start.from.toISOString();
  return out;
}

function schedulePath(name: string, suffix = ""): string {
  return "/v1/schedules/" + encodeURIComponent(name) + suffix;
}

function dropUndefined<T extends object>(o: T): Partial<T> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v;
  return out as Partial<T>;
}

function jobPath(id: string, suffix = ""): string {
  return "/v1/jobs/" + encodeURIComponent(id) + suffix;
}

function queuePath(name: string, suffix = ""): string {
  return "/v1/queues/" + encodeURIComponent(name) + suffix;
}

/**
 * A signal that aborts when parent aborts, or after timeoutMs with a
 * TimeoutError (as AbortSignal.timeout's), and a function that frees it.
 * Its timer holds the event loop, unlike AbortSignal.timeout's, so a call
 * times out even when nothing else keeps the process alive; and it works on
 * Node 18, which lacks AbortSignal.any.
 */
function linkSignals(parent: AbortSignal | undefined, timeoutMs: number): { signal: AbortSignal; dispose: () => void } {
  const ctl = new AbortController();
  const timer = setTimeout(
    () => ctl.abort(new DOMException(`the call took longer than ${timeoutMs} ms`, "TimeoutError")),
    Math.max(1, timeoutMs),
  );
  const onParent = () => ctl.abort(parent!.reason);
  if (parent?.aborted) onParent();
  parent?.addEventListener("abort", onParent, { once: true });
  return {
    signal: ctl.signal,
    dispose: () => {
      clearTimeout(timer);
      parent?.removeEventListener("abort", onParent);
    },
  };
}

/** Resolves after ms, or rejects with signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
