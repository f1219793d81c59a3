// A worker: fetches jobs in batches with long polling, runs them with the
// handlers registered for their kinds, heartbeats every held lease in one
// call, and acks or fails each job, sending the outcomes of jobs that finish
// together in one call ("Writing a worker" in docs/protocol.md).

import { SpoolClient, sleep } from "./client.js";
import { BatchTooLargeError, LeaseLostError, NotFoundError, PayloadTooLargeError, SpoolError } from "./errors.js";
import type { AckItem, AckResult, FailItem, FailResult, Job, JSONValue } from "./types.js";

/** What a handler gets besides its job. */
export interface JobContext {
  /** Aborts when the job must stop; `signal.reason` is a JobCancelledError, LeaseLostError or WorkerStoppedError. */
  signal: AbortSignal;
  /** The fencing token of the job's lease: an idempotency key downstream. */
  token: number;
  /** The attempt this run is: 1 for the first. */
  attempt: number;
  /** The W3C traceparent the job was enqueued with, if any. */
  traceparent?: string;
  /** Records the job's progress (any JSON value), shown with the job. */
  progress(value: JSONValue): Promise<void>;
}

/**
 * Runs one job. What it returns (or resolves with) is the job's result,
 * stored with the ack (`undefined` stores none). What it throws fails the
 * attempt with the error's message and stack: the job retries after its
 * backoff while it has attempts left, unless the error is a NoRetryError
 * (see noRetry: dead at once) or a RetryAfterError (see retryAfter).
 *
 * Delivery is at least once, so handlers should be idempotent.
 */
export type Handler = (job: Job, ctx: JobContext) => unknown | Promise<unknown>;

/** Thrown by a handler (or made with noRetry): the job dies at once, whatever attempts it has left. */
export class NoRetryError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "NoRetryError";
  }
}

/** Thrown by a handler (or made with retryAfter): the job retries after `retryAfterMs` instead of its backoff. */
export class RetryAfterError extends Error {
  readonly retryAfterMs: number;
  constructor(message: string, retryAfterMs: number, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "RetryAfterError";
    this.retryAfterMs = retryAfterMs;
  }
}

/** Wraps err so that the worker fails the job for good: `throw noRetry(err)`. */
export function noRetry(err: unknown): NoRetryError {
  const e = new NoRetryError(messageOf(err), { cause: err });
  if (err instanceof Error && err.stack) e.stack = err.stack;
  return e;
}

/** Wraps err so that the worker retries the job after ms instead of its backoff: `throw retryAfter(err, 60_000)`. */
export function retryAfter(err: unknown, ms: number): RetryAfterError {
  const e = new RetryAfterError(messageOf(err), ms, { cause: err });
  if (err instanceof Error && err.stack) e.stack = err.stack;
  return e;
}

/** The reason of a handler's signal when a user cancelled the running job. */
export class JobCancelledError extends Error {
  constructor(id: string) {
    super(`job ${id} cancelled`);
    this.name = "JobCancelledError";
  }
}

/** The reason of a handler's signal when the worker stopped before the handler finished (the job is released). */
export class WorkerStoppedError extends Error {
  constructor() {
    super("worker stopped");
    this.name = "WorkerStoppedError";
  }
}

/** Receives a worker's logs. */
export interface Logger {
  warn(message: string, fields?: Record<string, unknown>): void;
  debug?(message: string, fields?: Record<string, unknown>): void;
}

/** Options of a Worker. */
export interface WorkerOptions {
  /** The queues to take jobs from. Default ["default"]. */
  queues?: string[];
  /** The most handlers running at once. Default 10. */
  concurrency?: number;
  /**
   * The most jobs one fetch asks for: never more than the free slots, and a
   * fetch waits up to SETTLE_DELAY_MS for half of fetchMax to be free while
   * handlers run. Default: concurrency, at most 1000.
   */
  fetchMax?: number;
  /** The long poll of each fetch, at most 60000. Default 30000. */
  waitMs?: number;
  /** Overrides each job's own lease, at fetch and at every heartbeat. */
  leaseMs?: number;
  /** Time between heartbeats. Default: a third of the shortest lease held. */
  heartbeatIntervalMs?: number;
  /** How long stop() lets running handlers finish before it aborts them and releases their jobs. Default 30000. */
  shutdownTimeoutMs?: number;
  /** The worker's name, shown as its jobs' `worker`. Default "<host>/pid-<pid>". */
  name?: string;
  /** Run the jobs of this consumer group of each queue. */
  consumerGroup?: string;
  /** Run only the jobs of this group (the `group` jobs are enqueued with). */
  group?: string;
  /**
   * Fetch runs of ordered groups (FetchRequest.runs) and run the jobs of one
   * queue and group in a fetch answer one after another, in the order
   * received, each once the one before it is acked (answered completed, or
   * cancelled when asked). At the first job that fails, is released or loses
   * its lease (the server sends the rest of a run back then) the run stops and its later jobs are dropped
   * unrun and released in one call: on an ordered queue the server has put
   * them back already (their lease_lost is ignored); on a queue that is not
   * ordered the release makes them available again at once. A job waiting
   * its turn holds a slot of `concurrency` and has its lease extended; at
   * stop() all of a run's jobs not started are released. Default false.
   */
  runs?: boolean;
  /**
   * With `runs`, fetch the jobs of at most this many groups of each queue
   * (FetchRequest.max_groups): 1 takes one group's run a fetch, whichever
   * group. Default: any number.
   */
  maxGroups?: number;
  /** Stop gracefully on SIGTERM and SIGINT while running. Default true. */
  handleSignals?: boolean;
  /** Default: warnings to console.warn, no debug logs. */
  logger?: Logger;
}

/** One job the worker holds. */
interface Held {
  job: Job;
  token: number;
  leaseMs: number;
  /** Its handler's signal, made when the handler first reads it. */
  abort?: AbortController;
  /** Why the handler must stop, once it must. */
  abortReason?: unknown;
  cancelSeen: boolean;
  lost: boolean;
  abandoned: boolean;
  /** Its outcome reached the settler. */
  arrived?: boolean;
  /** The job before it in its run, if any (WorkerOptions.runs). */
  follows?: Held;
}

/**
 * The most a worker holds a finished job's ack or fail (in ms) for the
 * outcomes of other handlers to share its call, and a fetch for more slots
 * to free. None is held when no other handler runs, nor once the worker
 * stops.
 */
export const SETTLE_DELAY_MS = 2;

/** The states of an acked job: the rest of its run goes on. After a failure the server sends the rest of a run back. */
const ACKED: ReadonlySet<string> = new Set(["completed", "cancelled"]);

const MAX_FETCH = 1000;
const MAX_HEARTBEAT_BATCH = 1000;
const MAX_FAIL_MESSAGE = 64 * 1024;
const CALL_TIMEOUT_MS = 10_000;
const BACKOFF_MIN_MS = 100;
const BACKOFF_MAX_MS = 5_000;

/**
 * Fetches jobs from a Spool server and runs them with the handlers
 * registered for their kinds, up to `concurrency` at once.
 *
 * ```ts
 * const worker = new Worker(client, { queues: ["emails"] });
 * worker.handle("send_welcome", async (job, { signal }) => ({ sent: true }));
 * await worker.run(); // until SIGTERM, SIGINT or worker.stop()
 * ```
 *
 * A job whose kind has no handler is failed (not released, which would hand
 * it straight back) with an error naming the kind.
 *
 * Handlers that finish together share their calls: an ack or fail waits at
 * most SETTLE_DELAY_MS (2 ms) for others to join it in one batch call, and
 * none when no other handler runs or the worker stops; each job still gets
 * its own answer, so a stale token fails only its own job. A handler's slot
 * frees when it returns, and a fetch asks for every free slot. A job stays
 * the worker's, its lease extended, until its outcome is answered (a worker
 * that dies before then leaves it to be handed out again when its lease
 * ends); at most four times `concurrency` jobs are held at once, so that
 * acks waiting for the disk do not keep the next fetch from filling the slots.
 */
export class Worker {
  readonly name: string;
  private readonly client: SpoolClient;
  private readonly opts: Required<Pick<WorkerOptions, "queues" | "concurrency" | "fetchMax" | "waitMs" | "shutdownTimeoutMs" | "handleSignals">> &
    WorkerOptions;
  private readonly log: Logger;
  private readonly handlers = new Map<string, Handler>();
  /** Acks and fails of jobs that finish together go in one call each. */
  private readonly settler: Settler;
  private readonly held = new Map<string, Held>();
  /** The runners of held jobs: their handlers, then their outcomes. */
  private readonly running = new Set<Promise<unknown>>();
  /** Handlers running: slots in use. */
  private handlersRunning = 0;
  private started = false;
  private stopping = false;
  private fetchAbort = new AbortController();
  private wake: (() => void) | undefined;
  private hbAbort = new AbortController();
  private hbLoop: Promise<void> | undefined;
  private hbFailures = 0;
  private hbKick: (() => void) | undefined;
  private stopped: Promise<void> | undefined;
  private fetching: Promise<void> | undefined;
  private runDone!: Promise<void>;
  private resolveRun!: () => void;

  constructor(client: SpoolClient, options: WorkerOptions = {}) {
    const concurrency = options.concurrency ?? 10;
    this.client = client;
    this.opts = {
      ...options,
      queues: options.queues ?? ["default"],
      concurrency,
      fetchMax: Math.min(options.fetchMax ?? concurrency, MAX_FETCH),
      waitMs: options.waitMs ?? 30_000,
      shutdownTimeoutMs: options.shutdownTimeoutMs ?? 30_000,
      handleSignals: options.handleSignals ?? true,
    };
    this.name = options.name ?? defaultName();
    this.settler = new Settler(this.client, Math.min(concurrency, MAX_SETTLE_ITEMS));
    this.log = options.logger ?? { warn: (m, f) => console.warn(`spool worker ${this.name}: ${m}`, f ?? "") };
    this.runDone = new Promise((r) => (this.resolveRun = r));
  }

  /** Registers the handler of a job kind. */
  handle(kind: string, handler: Handler): this {
    if (this.started) throw new Error("Worker.handle: the worker already runs");
    this.handlers.set(kind, handler);
    return this;
  }

  /** How many jobs the worker holds now. */
  get heldCount(): number {
    return this.held.size;
  }

  /**
   * Runs the worker until stop() (or SIGTERM/SIGINT with handleSignals)
   * and resolves once it has stopped: running handlers finished or their
   * jobs released.
   */
  async run(): Promise<void> {
    if (this.started) throw new Error("Worker.run: a worker runs once");
    this.started = true;
    const proc = (globalThis as { process?: NodeProcessLike }).process;
    const onSignal = () => void this.stop();
    if (this.opts.handleSignals && proc?.once) {
      proc.once("SIGTERM", onSignal);
      proc.once("SIGINT", onSignal);
    }
    try {
      this.fetching = this.fetchLoop();
      await this.fetching;
      await this.runDone;
    } finally {
      if (this.opts.handleSignals && proc?.removeListener) {
        proc.removeListener("SIGTERM", onSignal);
        proc.removeListener("SIGINT", onSignal);
      }
    }
  }

  /**
   * Stops the worker: no more fetches; running handlers get
   * shutdownTimeoutMs to finish, then their signals abort (reason
   * WorkerStoppedError) and their jobs are released, available again at
   * once. Resolves when done; calling it again returns the same promise.
   */
  stop(): Promise<void> {
    if (!this.stopped) this.stopped = this.doStop();
    return this.stopped;
  }

  private async doStop(): Promise<void> {
    this.stopping = true;
    this.fetchAbort.abort(new WorkerStoppedError());
    this.wake?.();
    this.settler.flush(); // outcomes waiting to be shared go now
    // Jobs a fetch brings as it ends are held, and released below.
    await this.fetching?.catch(() => {});
    if (this.running.size > 0 && this.opts.shutdownTimeoutMs > 0) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        Promise.allSettled([...this.running]),
        new Promise((r) => (timer = setTimeout(r, this.opts.shutdownTimeoutMs))),
      ]);
      clearTimeout(timer);
    }
    const left = [...this.held.values()].filter((h) => !h.lost);
    for (const h of left) {
      h.abandoned = true;
      abortJob(h, new WorkerStoppedError());
    }
    // Every job of a run still held is released too: on an ordered queue the
    // release of the first sends the later ones back, and theirs answer
    // lease_lost (see releaseAll).
    await this.releaseAll(left);
    this.hbAbort.abort();
    await this.hbLoop;
    this.resolveRun();
  }

  // ---- fetching --------------------------------------------------------

  private async fetchLoop(): Promise<void> {
    let failures = 0;
    while (!this.stopping) {
      let free = this.free();
      if (free <= 0) {
        await new Promise<void>((r) => (this.wake = r));
        this.wake = undefined;
        continue;
      }
      const half = Math.ceil(this.opts.fetchMax / 2);
      if (free < half && this.handlersRunning > 0) {
        // Handlers that finish together share one fetch.
        const deadline = Date.now() + SETTLE_DELAY_MS;
        while (free < half && this.handlersRunning > 0 && !this.stopping && Date.now() < deadline) {
          let timer: ReturnType<typeof setTimeout> | undefined;
          await new Promise<void>((r) => {
            this.wake = r;
            timer = setTimeout(r, Math.max(1, deadline - Date.now()));
          });
          clearTimeout(timer);
          this.wake = undefined;
          free = this.free();
        }
        if (free <= 0 || this.stopping) continue;
      }
      let jobs: Job[];
      try {
        jobs = await this.client.fetchJobs(
          {
            queues: this.opts.queues,
            max: Math.min(free, this.opts.fetchMax),
            wait_ms: this.opts.waitMs,
            lease_ms: this.opts.leaseMs,
            worker: this.name,
            consumer_group: this.opts.consumerGroup,
            group: this.opts.group,
            runs: this.opts.runs,
            max_groups: this.opts.maxGroups,
          },
          { signal: this.fetchAbort.signal },
        );
        failures = 0;
      } catch (err) {
        if (this.stopping) break;
        failures++;
        this.log.warn("fetch failed; retrying", { err: messageOf(err) });
        await sleep(backoff(failures), this.fetchAbort.signal).catch(() => {});
        continue;
      }
      if (this.opts.runs) for (const run of runsOf(jobs)) this.startRun(run);
      else for (const job of jobs) this.start(job);
      if (this.stopping) break;
    }
  }

  /**
   * The free slots: handlers that may start, as long as the jobs held
   * (running, or waiting for their outcome's answer) stay within four times
   * `concurrency`.
   */
  private free(): number {
    return Math.min(this.opts.concurrency - this.handlersRunning, 4 * this.opts.concurrency - this.held.size);
  }

  /** Holds job: its lease is extended from now until its outcome is answered. */
  private hold(job: Job): Held {
    const h: Held = {
      job,
      token: job.lease?.token ?? 0,
      leaseMs: this.opts.leaseMs ?? job.lease_ms,
      cancelSeen: false,
      lost: false,
      abandoned: false,
    };
    this.held.set(job.id, h);
    this.ensureHeartbeat();
    return h;
  }

  private start(job: Job): void {
    const h = this.hold(job);
    if (this.stopping) {
      // Fetched as the worker stopped: hand it back unrun.
      h.abandoned = true;
      return;
    }
    this.handlersRunning++;
    this.settler.expect(1);
    const p = this.runJob(h)
      .catch((err) => this.log.warn("job runner failed", { job_id: job.id, err: messageOf(err) }))
      .finally(() => {
        if (!h.arrived) this.settler.expect(-1); // its outcome will not come
        this.running.delete(p);
        this.wake?.();
      });
    this.running.add(p);
  }

  /** Runs the jobs of one run in order; each holds a slot from now until its handler returns or it is dropped. */
  private startRun(jobs: Job[]): void {
    const run = jobs.map((job) => this.hold(job));
    run.forEach((h, i) => (h.follows = i > 0 ? run[i - 1] : undefined));
    if (this.stopping) {
      // Fetched as the worker stopped: hand it back unrun.
      for (const h of run) h.abandoned = true;
      return;
    }
    this.handlersRunning += run.length;
    const p = this.runInOrder(run)
      .catch((err) => this.log.warn("run failed", { job_id: run[0].job.id, err: messageOf(err) }))
      .finally(() => {
        this.running.delete(p);
        this.wake?.();
      });
    this.running.add(p);
  }

  /**
   * Runs each job of run once the one before it ended. Once one does not
   * end, its later jobs are dropped (see dropRun); once the worker stops,
   * the jobs not started are left for stop() to release.
   */
  private async runInOrder(run: Held[]): Promise<void> {
    for (let i = 0; i < run.length; i++) {
      if (this.stopping) {
        this.handlersRunning -= run.length - i;
        return;
      }
      const h = run[i];
      this.settler.expect(1);
      let ended = false;
      try {
        ended = await this.runJob(h);
      } finally {
        if (!h.arrived) this.settler.expect(-1); // its outcome will not come
      }
      if (!ended) {
        await this.dropRun(run.slice(i + 1));
        return;
      }
    }
  }

  /**
   * Drops rest, the jobs of a run after one that did not end, unrun: lets
   * go of those stop() has not taken, hands those whose leases are not known
   * lost back in one release call, in order, then frees their slots. On an
   * ordered queue the server has put them back already and answers
   * lease_lost (or not_found), as expected; on another queue the release
   * makes them available again before their leases run out. A failed call
   * is logged, and the jobs then wait out their leases.
   */
  private async dropRun(rest: Held[]): Promise<void> {
    const mine = rest.filter((h) => !h.abandoned);
    for (const h of mine) this.held.delete(h.job.id);
    const items = mine.filter((h) => !h.lost).map((h) => ({ id: h.job.id, token: h.token }));
    try {
      if (items.length > 0) {
        const results = await this.client.releaseMany(items, { timeoutMs: CALL_TIMEOUT_MS });
        results.forEach((r, i) => {
          if (r instanceof SpoolError && !expectedForRun(r)) this.log.warn("release refused", { job_id: items[i].id, err: r.message });
        });
      }
    } catch (err) {
      this.log.warn("release of a run's dropped jobs failed; they run again once their leases run out", { jobs: items.length, err: messageOf(err) });
    } finally {
      this.handlersRunning -= rest.length;
      this.wake?.();
    }
  }

  // ---- running ---------------------------------------------------------

  /**
   * Runs h's handler and sends its outcome; resolves true when the job
   * was acked (answered completed, or cancelled when asked), so that the rest of its
   * run may go on.
   */
  private async runJob(h: Held): Promise<boolean> {
    const { job } = h;
    const handler = this.handlers.get(job.kind);
    let result: unknown;
    let resultSize = 0;
    let error: unknown;
    let threw = false;
    try {
      // A job of a run may be told to stop before its turn: its handler does not run.
      if (h.abortReason !== undefined) throw h.abortReason;
      if (!handler) throw new Error(`no handler for kind "${job.kind}" on worker ${this.name}`);
      const ctx: JobContext = {
        get signal(): AbortSignal {
          if (!h.abort) {
            h.abort = new AbortController();
            if (h.abortReason !== undefined) h.abort.abort(h.abortReason);
          }
          return h.abort.signal;
        },
        token: h.token,
        attempt: job.attempt,
        traceparent: job.traceparent,
        progress: (value) => this.client.progress(job.id, h.token, value, { timeoutMs: CALL_TIMEOUT_MS }),
      };
      const value = await handler(job, ctx);
      if (value !== undefined) {
        const text = JSON.stringify(value);
        result = JSON.parse(text) as JSONValue; // throws for what JSON cannot hold
        resultSize = text.length;
      }
    } catch (err) {
      threw = true;
      error = err;
    }
    // The slot is free before the outcome is sent.
    this.handlersRunning--;
    this.wake?.();
    if (h.abandoned) return false; // released by stop()
    if (h.lost) {
      this.held.delete(job.id);
      this.log.warn("lease lost; the handler's outcome is dropped", { job_id: job.id });
      return false;
    }
    try {
      let answer: AckResult | FailResult | undefined;
      if (threw) {
        const { message, opts } = failOf(error);
        const item: FailItem = { id: job.id, token: h.token, error: message, ...opts };
        answer = await this.settle(h, (arrived) => this.settler.fail(item, arrived, this.stopping));
      } else {
        const item: AckItem = { id: job.id, token: h.token };
        if (result !== undefined) item.result = result as JSONValue;
        answer = await this.settle(h, (arrived) => this.settler.ack(item, resultSize, arrived, this.stopping));
      }
      return !threw && answer !== undefined && ACKED.has(answer.state);
    } finally {
      if (!h.abandoned) this.held.delete(job.id);
    }
  }

  /**
   * Sends an ack or fail with those of the jobs that finish with it,
   * retrying transport failures while the lease may still hold; resolves
   * with its answer, or undefined when none came.
   */
  private async settle<T>(h: Held, call: (arrived: boolean) => Promise<T>): Promise<T | undefined> {
    for (let attempt = 1; ; attempt++) {
      try {
        const arrived = !h.arrived;
        h.arrived = true;
        return await call(arrived);
      } catch (err) {
        if (err instanceof LeaseLostError || err instanceof NotFoundError) {
          this.log.warn("lease lost before the outcome was sent; dropped", { job_id: h.job.id, err: err.message });
          return undefined;
        }
        if (err instanceof SpoolError && err.status < 500) {
          this.log.warn("outcome refused", { job_id: h.job.id, err: err.message });
          return undefined;
        }
        if (attempt >= 5 || h.abandoned) {
          this.log.warn("outcome not sent; the job runs again once its lease runs out", { job_id: h.job.id, err: messageOf(err) });
          return undefined;
        }
        await sleep(backoff(attempt));
      }
    }
  }

  // ---- heartbeats ------------------------------------------------------

  private ensureHeartbeat(): void {
    if (!this.hbLoop) this.hbLoop = this.heartbeatLoop();
    else this.hbKick?.();
  }

  /** One loop for the whole worker: every interval, one extend call for every held lease. */
  private async heartbeatLoop(): Promise<void> {
    const signal = this.hbAbort.signal;
    let lastBeat = Date.now();
    while (!signal.aborted) {
      const live = [...this.held.values()].filter((h) => !h.lost && !h.abandoned);
      let interval = this.opts.heartbeatIntervalMs ?? (live.length > 0 ? Math.max(50, Math.min(...live.map((h) => h.leaseMs)) / 3) : 1_000);
      if (this.hbFailures > 0) interval = Math.min(interval, backoff(this.hbFailures));
      const kicked = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => done(false), Math.max(0, lastBeat + interval - Date.now()));
        const onAbort = () => done(true);
        const done = (k: boolean) => {
          clearTimeout(timer);
          signal.removeEventListener("abort", onAbort);
          this.hbKick = undefined;
          resolve(k);
        };
        signal.addEventListener("abort", onAbort, { once: true });
        // A new job with a lease shorter than the wait makes the loop plan again.
        this.hbKick = () => done(true);
      });
      if (signal.aborted) return;
      if (kicked) continue;
      lastBeat = Date.now();
      const due = [...this.held.values()].filter((h) => !h.lost && !h.abandoned);
      for (let i = 0; i < due.length; i += MAX_HEARTBEAT_BATCH) {
        await this.beat(due.slice(i, i + MAX_HEARTBEAT_BATCH));
      }
    }
  }

  private async beat(batch: Held[]): Promise<void> {
    let results;
    try {
      results = await this.client.extendMany(
        batch.map((h) => ({ id: h.job.id, token: h.token, lease_ms: this.opts.leaseMs })),
        { timeoutMs: CALL_TIMEOUT_MS },
      );
      this.hbFailures = 0;
    } catch (err) {
      this.hbFailures++;
      this.log.warn("heartbeat failed; retrying", { jobs: batch.length, err: messageOf(err) });
      return;
    }
    results.forEach((r, i) => {
      const h = batch[i];
      if (r instanceof LeaseLostError || r instanceof NotFoundError) {
        if (!h.lost && !h.abandoned) this.log.warn("lease lost; handler aborted", { job_id: h.job.id });
        h.lost = true;
        abortJob(h, r);
      } else if (r instanceof SpoolError) {
        this.log.warn("heartbeat of one job failed", { job_id: h.job.id, err: r.message });
      } else if (r.cancel_requested && !h.cancelSeen) {
        h.cancelSeen = true;
        abortJob(h, new JobCancelledError(h.job.id));
        this.log.debug?.("job cancelled by a user; handler aborted", { job_id: h.job.id });
      }
    });
  }

  // ---- shutdown --------------------------------------------------------

  private async releaseAll(list: Held[]): Promise<void> {
    for (let attempt = 1; list.length > 0; attempt++) {
      try {
        const results = await this.client.releaseMany(
          list.map((h) => ({ id: h.job.id, token: h.token })),
          { timeoutMs: CALL_TIMEOUT_MS },
        );
        results.forEach((r, i) => {
          // A later job of a run on an ordered queue went back with the first.
          if (r instanceof SpoolError && !(list[i].follows !== undefined && expectedForRun(r))) {
            this.log.warn("release refused", { job_id: list[i].job.id, err: r.message });
          }
        });
        break;
      } catch (err) {
        if (attempt >= 3) {
          this.log.warn("release failed; the jobs run again once their leases run out", { jobs: list.length, err: messageOf(err) });
          break;
        }
        await sleep(backoff(attempt));
      }
    }
    for (const h of list) this.held.delete(h.job.id);
  }
}

/** Reports whether err, refusing the release of a job of a run, is expected: the server sent the job back already. */
function expectedForRun(err: SpoolError): boolean {
  return err instanceof LeaseLostError || err instanceof NotFoundError;
}

/** Splits fetched jobs into runs: those of one queue and group, in the order received; a job without a group runs alone. */
function runsOf(jobs: Job[]): Job[][] {
  const runs = new Map<string, Job[]>();
  for (const job of jobs) {
    const key = job.group ? JSON.stringify([job.queue, job.group]) : `id:${job.id}`;
    const run = runs.get(key);
    if (run) run.push(job);
    else runs.set(key, [job]);
  }
  return [...runs.values()];
}

/** Tells h's handler to stop, with reason, unless it was told already. */
function abortJob(h: Held, reason: unknown): void {
  if (h.abortReason !== undefined) return;
  h.abortReason = reason;
  h.abort?.abort(reason);
}

interface NodeProcessLike {
  pid?: number;
  once?(event: string, fn: () => void): void;
  removeListener?(event: string, fn: () => void): void;
}

/** The fail a handler's thrown value makes. */
function failOf(err: unknown): { message: string; opts: { no_retry?: boolean; retry_after_ms?: number } } {
  let message = err instanceof Error ? err.stack || `${err.name}: ${err.message}` : messageOf(err);
  if (err instanceof Error && err.stack && !err.stack.includes(err.message)) message = `${err.message}\n${err.stack}`;
  if (!message) message = "handler failed with an empty message";
  if (message.length > MAX_FAIL_MESSAGE / 4) message = truncateUtf8(message, MAX_FAIL_MESSAGE);
  const opts: { no_retry?: boolean; retry_after_ms?: number } = {};
  if (err instanceof NoRetryError) opts.no_retry = true;
  if (err instanceof RetryAfterError && err.retryAfterMs > 0) opts.retry_after_ms = Math.ceil(err.retryAfterMs);
  return { message, opts };
}

function truncateUtf8(s: string, maxBytes: number): string {
  const bytes = new TextEncoder().encode(s);
  if (bytes.length <= maxBytes) return s;
  return new TextDecoder().decode(bytes.slice(0, maxBytes)).replace(/\uFFFD$/, "");
}

function messageOf(err: unknown): string {
  if (err instanceof Error) return err.message;
  try {
    return typeof err === "string" ? err : JSON.stringify(err);
  } catch {
    return String(err);
  }
}

function backoff(failures: number): number {
  const d = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** Math.max(0, failures - 1));
  return d / 2 + Math.random() * (d / 2);
}

function defaultName(): string {
  const proc = (globalThis as { process?: { pid?: number; env?: Record<string, string | undefined> } }).process;
  const host = proc?.env?.HOSTNAME || "host";
  return `${host}/pid-${proc?.pid ?? 0}`;
}

/** The most items of one ack or fail call, and the most bytes of results and errors gathered for one. */
const MAX_SETTLE_ITEMS = 1000;
const MAX_SETTLE_BYTES = 4 << 20;
/** The item a batch call's refusal names, as in "items[3].result". */
const ITEM_FIELD = /^items\[(\d+)\]\.?(.*)$/;

interface Pending<T> {
  item: AckItem | FailItem;
  resolve: (r: T) => void;
  reject: (err: unknown) => void;
}

/**
 * Gathers the acks and fails of jobs that finish together and sends each
 * kind in one call (POST /v1/jobs/ack, POST /v1/jobs/fail). Each outcome's
 * promise settles with its own item's answer, as the single call would: a
 * refused item (a lost lease) rejects with its own SpoolError, a failed call
 * rejects every outcome it carried, and a call refused as a whole for one
 * item (a result over the limit) rejects that outcome and sends the others
 * again. An outcome waits at most SETTLE_DELAY_MS, less when maxItems wait,
 * no other outcome is on its way (`coming`), or the worker stops.
 */
class Settler {
  private acks: Pending<AckResult>[] = [];
  private fails: Pending<FailResult>[] = [];
  private bytes = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** Outcomes on their way: of jobs started, not yet submitted. */
  private coming = 0;

  constructor(
    private readonly client: SpoolClient,
    private readonly maxItems: number,
  ) {}

  /** Counts n more outcomes on their way (fewer when negative). */
  expect(n: number): void {
    this.coming += n;
    if (this.coming <= 0 && (this.acks.length > 0 || this.fails.length > 0)) this.flush();
  }

  /**
   * Sends an ack whose result takes about `size` bytes; `arrived` says it is
   * its job's first outcome, one expect counted.
   */
  ack(item: AckItem, size: number, arrived: boolean, stopping: boolean): Promise<AckResult> {
    return this.submit(this.acks, item, 64 + size, arrived, stopping);
  }

  /** Sends a fail; see ack. */
  fail(item: FailItem, arrived: boolean, stopping: boolean): Promise<FailResult> {
    return this.submit(this.fails, item, 64 + item.error.length, arrived, stopping);
  }

  private submit<T>(waiting: Pending<T>[], item: AckItem | FailItem, size: number, arrived: boolean, stopping: boolean): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (arrived) this.coming--;
      waiting.push({ item, resolve, reject });
      this.bytes += size;
      if (stopping || this.coming <= 0 || waiting.length >= this.maxItems || this.bytes >= MAX_SETTLE_BYTES) this.flush();
      else if (this.timer === undefined) this.timer = setTimeout(() => this.flush(), SETTLE_DELAY_MS);
    });
  }

  /** Sends what waits. */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const acks = this.acks;
    const fails = this.fails;
    this.acks = [];
    this.fails = [];
    this.bytes = 0;
    if (acks.length > 0) void this.send(acks, (items) => this.client.ackMany(items as AckItem[], { timeoutMs: CALL_TIMEOUT_MS }));
    if (fails.length > 0) void this.send(fails, (items) => this.client.failMany(items as FailItem[], { timeoutMs: CALL_TIMEOUT_MS }));
  }

  private async send<T>(batch: Pending<T>[], call: (items: (AckItem | FailItem)[]) => Promise<(T | SpoolError)[]>): Promise<void> {
    while (batch.length > 0) {
      let results: (T | SpoolError)[];
      try {
        results = await call(batch.map((p) => p.item));
      } catch (err) {
        const named = err instanceof SpoolError ? ITEM_FIELD.exec(err.field ?? "") : null;
        const i = named ? Number(named[1]) : -1;
        if (err instanceof SpoolError && named && i < batch.length) {
          const ctor = err.constructor as new (code: string, message: string, status: number, field?: string) => SpoolError;
          const message = err.message.startsWith(`${err.code}: `) ? err.message.slice(err.code.length + 2) : err.message;
          batch[i].reject(new ctor(err.code, message, err.status, named[2] || undefined));
          batch = batch.filter((_, k) => k !== i);
          continue;
        }
        if (batch.length > 1 && (err instanceof BatchTooLargeError || err instanceof PayloadTooLargeError)) {
          const half = Math.ceil(batch.length / 2);
          await this.send(batch.slice(0, half), call);
          await this.send(batch.slice(half), call);
          return;
        }
        for (const p of batch) p.reject(err);
        return;
      }
      batch.forEach((p, k) => {
        const r = results[k];
        if (r instanceof SpoolError) p.reject(r);
        else p.resolve(r);
      });
      return;
    }
  }
}
