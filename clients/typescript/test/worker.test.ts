import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import {
  SpoolClient,
  Worker,
  noRetry,
  retryAfter,
  JobCancelledError,
  WorkerStoppedError,
  LeaseLostError,
  type Job,
  type JobContext,
} from "../src/index.js";
import { startServer, eventually, type Server } from "./server.js";

let server: Server;
let client: SpoolClient;
const quiet = { warn: () => {} };

before(async () => {
  server = await startServer();
  client = new SpoolClient(server.url);
});
after(async () => {
  await server?.stop();
});

function worker(queue: string, opts: ConstructorParameters<typeof Worker>[1] = {}): Worker {
  return new Worker(client, { queues: [queue], waitMs: 500, handleSignals: false, logger: quiet, ...opts });
}

test("enqueue → worker → ack with the handler's result", async () => {
  const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  const seen: { job: Job; ctx: JobContext }[] = [];
  const w = worker("w-ack", { name: "ts-worker-1" });
  w.handle("add", async (job, ctx) => {
    seen.push({ job, ctx });
    await ctx.progress({ pct: 100 });
    const { a, b } = job.payload as { a: number; b: number };
    return { sum: a + b };
  });
  const running = w.run();
  const done = await client.enqueueAndWait({ queue: "w-ack", kind: "add", payload: { a: 2, b: 3 }, traceparent: tp }, { waitMs: 10_000 });
  await w.stop();
  await running;
  assert.equal(done.state, "completed");
  assert.deepEqual(done.result, { sum: 5 });
  assert.deepEqual(done.progress, { pct: 100 });
  assert.equal(done.worker, "ts-worker-1");
  assert.equal(seen.length, 1);
  assert.equal(seen[0].ctx.attempt, 1);
  assert.equal(seen[0].ctx.traceparent, tp);
  assert.equal(seen[0].ctx.token, seen[0].job.lease!.token);
  assert.ok(seen[0].ctx.token > 0);
});

test("runs handlers concurrently from batch fetches", async () => {
  const w = worker("w-conc", { concurrency: 5 });
  let now = 0;
  let peak = 0;
  w.handle("sleep", async () => {
    now++;
    peak = Math.max(peak, now);
    await new Promise((r) => setTimeout(r, 300));
    now--;
  });
  const ids = (await client.enqueueMany(Array.from({ length: 10 }, () => ({ queue: "w-conc", kind: "sleep" })))).map((r) => r.id);
  const running = w.run();
  const jobs = await Promise.all(ids.map((id) => client.awaitJob(id, { waitMs: 10_000 })));
  await w.stop();
  await running;
  assert.ok(jobs.every((j) => j.state === "completed"));
  assert.ok(peak > 1 && peak <= 5, `peak concurrency ${peak}`);
});

test("a throwing handler retries until dead, each error recorded; noRetry kills at once", async () => {
  const w = worker("w-fail");
  let calls = 0;
  w.handle("flaky", async () => {
    calls++;
    throw new Error(`boom ${calls}`);
  });
  w.handle("fatal", async () => {
    throw noRetry(new Error("bad payload"));
  });
  w.handle("later", async (job) => {
    if (job.attempt === 1) throw retryAfter(new Error("come back"), 200);
    return "second time";
  });
  const running = w.run();
  const backoff = { type: "fixed" as const, base_ms: 50, max_ms: 50, jitter: 0 };
  const [flaky, fatal, later] = await Promise.all([
    client.enqueueAndWait({ queue: "w-fail", kind: "flaky", max_attempts: 3, backoff }, { waitMs: 10_000 }),
    client.enqueueAndWait({ queue: "w-fail", kind: "fatal", max_attempts: 5 }, { waitMs: 10_000 }),
    client.enqueueAndWait({ queue: "w-fail", kind: "later", max_attempts: 5, backoff: { type: "fixed", base_ms: 60_000, max_ms: 60_000 } }, { waitMs: 10_000 }),
  ]);
  await w.stop();
  await running;
  assert.equal(flaky.state, "dead");
  assert.equal(flaky.errors?.length, 3);
  assert.deepEqual(flaky.errors!.map((e) => e.attempt), [1, 2, 3]);
  assert.match(flaky.errors![0].message, /^Error: boom 1\n\s+at /, "message and stack");
  assert.equal(fatal.state, "dead");
  assert.equal(fatal.errors?.length, 1);
  assert.match(fatal.errors![0].message, /bad payload/);
  assert.equal(later.state, "completed", "retried after retry_after_ms, not its one-minute backoff");
  assert.equal(later.result, "second time");
});

test("a job with no handler for its kind is failed naming the kind", async () => {
  const w = worker("w-nohandler");
  w.handle("known", () => null);
  const running = w.run();
  const { id } = await client.enqueue({ queue: "w-nohandler", kind: "unknown", max_attempts: 1 });
  const job = await client.awaitJob(id, { waitMs: 10_000 });
  await w.stop();
  await running;
  assert.equal(job.state, "dead");
  assert.match(job.errors![0].message, /no handler for kind "unknown"/);
});

test("cancel of a running job aborts the handler's signal and the job ends cancelled", async () => {
  const w = worker("w-cancel", { heartbeatIntervalMs: 100 });
  let started!: () => void;
  const startedP = new Promise<void>((r) => (started = r));
  let reason: unknown;
  w.handle("long", (_job, { signal }) => {
    started();
    return new Promise((_, reject) => {
      signal.addEventListener("abort", () => {
        reason = signal.reason;
        reject(signal.reason);
      });
    });
  });
  const running = w.run();
  const { id } = await client.enqueue({ queue: "w-cancel", kind: "long" });
  await startedP;
  const asked = await client.cancelJob(id);
  assert.equal(asked.state, "active");
  assert.equal(asked.cancel_requested, true);
  const job = await client.awaitJob(id, { waitMs: 5_000 });
  await w.stop();
  await running;
  assert.equal(job.state, "cancelled");
  assert.ok(reason instanceof JobCancelledError);
});

test("heartbeats keep a short lease alive past its length", async () => {
  const w = worker("w-hb");
  w.handle("slow", async () => {
    await new Promise((r) => setTimeout(r, 1_500));
    return "done";
  });
  const running = w.run();
  const job = await client.enqueueAndWait({ queue: "w-hb", kind: "slow", lease_ms: 500, max_attempts: 1 }, { waitMs: 10_000 });
  await w.stop();
  await running;
  assert.equal(job.state, "completed");
  assert.equal(job.attempt, 1);
  assert.equal(job.result, "done");
});

test("a lease lost between heartbeats aborts the handler and drops its outcome", async () => {
  // Heartbeats come too late for the job's 300 ms lease: the server takes the job back.
  const w = worker("w-lost", { concurrency: 1, heartbeatIntervalMs: 1_200 });
  let reason: unknown;
  w.handle("slow", (_job, { signal }) => {
    return new Promise((resolve) =>
      signal.addEventListener("abort", () => {
        reason = signal.reason;
        resolve("too late");
      }),
    );
  });
  const { id } = await client.enqueue({ queue: "w-lost", kind: "slow", lease_ms: 300, backoff: { type: "fixed", base_ms: 60_000, max_ms: 60_000 } });
  const running = w.run();
  await eventually(() => reason !== undefined, 5_000);
  await w.stop();
  await running;
  assert.ok(reason instanceof LeaseLostError, String(reason));
  const job = await client.getJob(id);
  assert.notEqual(job.state, "completed", "the late result was dropped");
  assert.equal(job.result, undefined);
});

test("graceful stop lets handlers finish, then releases the jobs still held", async () => {
  // The timeout leaves the quick handler time to finish on a loaded machine.
  const w = worker("w-stop", { concurrency: 3, shutdownTimeoutMs: 2000 });
  const started: string[] = [];
  let stoppedReason: unknown;
  w.handle("quick", async () => {
    started.push("quick");
    await new Promise((r) => setTimeout(r, 100));
    return "finished";
  });
  w.handle("stuck", (_job, { signal }) => {
    started.push("stuck");
    return new Promise((_, reject) => signal.addEventListener("abort", () => reject((stoppedReason = signal.reason))));
  });
  const quick = await client.enqueue({ queue: "w-stop", kind: "quick" });
  const stuck = await client.enqueue({ queue: "w-stop", kind: "stuck" });
  const running = w.run();
  await eventually(() => started.length === 2);
  await w.stop();
  await running;
  assert.ok(stoppedReason instanceof WorkerStoppedError);
  assert.equal(w.heldCount, 0);
  assert.equal((await client.getJob(quick.id)).state, "completed");
  const released = await client.getJob(stuck.id);
  assert.equal(released.state, "available", "released, available again at once");
  assert.equal(released.attempt, 0);
  assert.equal(released.errors, undefined);
  const [again] = await client.fetchJobs({ queues: ["w-stop"] });
  assert.equal(again.id, stuck.id);
});

test("SIGTERM stops a worker that handles signals", async () => {
  const w = new Worker(client, { queues: ["w-signal"], waitMs: 500, logger: quiet, shutdownTimeoutMs: 100 });
  w.handle("k", () => null);
  const running = w.run();
  await new Promise((r) => setTimeout(r, 100));
  process.kill(process.pid, "SIGTERM");
  await running;
});

test("a stale token in a batch fails only its own job", async () => {
  const calls: number[] = [];
  const counting = new SpoolClient(server.url);
  const send = counting.ackMany.bind(counting);
  counting.ackMany = async (items, options) => {
    calls.push(items.length);
    return send(items, options);
  };
  const w = new Worker(counting, { queues: ["w-stale"], concurrency: 2, waitMs: 500, handleSignals: false, logger: quiet, heartbeatIntervalMs: 60_000 });
  const tokens = new Map<string, number>();
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  w.handle("k", async (job, ctx) => {
    tokens.set(job.id, ctx.token);
    await released;
    return "done by the worker";
  });
  const stale = (await client.enqueue({ queue: "w-stale", kind: "k" })).id;
  const kept = (await client.enqueue({ queue: "w-stale", kind: "k" })).id;
  const running = w.run();
  await eventually(() => tokens.size === 2);
  // The lease of one job goes to another holder: the worker's token is stale,
  // which it learns only from its ack.
  await client.release(stale, tokens.get(stale)!);
  const [other] = await client.fetchJobs({ queues: ["w-stale"], max: 1 });
  assert.equal(other.id, stale);
  release();
  const done = await client.awaitJob(kept, { waitMs: 10_000 });
  await w.stop();
  await running;
  counting.close();
  assert.equal(done.state, "completed");
  assert.equal(done.result, "done by the worker");
  assert.deepEqual(calls, [2]); // both acks in one call
  const job = await client.getJob(stale);
  assert.equal(job.state, "active");
  assert.equal(job.lease?.token, other.lease!.token);
  assert.equal((await client.ack(stale, other.lease!.token, "theirs")).state, "completed");
});

test("handlers that finish together share their calls: fetches, acks and fails", async () => {
  const counts: Record<string, number> = { fetchJobs: 0, ackMany: 0, failMany: 0, extendMany: 0, ack: 0, fail: 0 };
  const counting = new SpoolClient(server.url);
  for (const name of Object.keys(counts)) {
    const c = counting as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
    const send = c[name].bind(counting);
    c[name] = (...a: unknown[]) => {
      counts[name]++;
      return send(...a);
    };
  }
  const n = 1000;
  const w = new Worker(counting, { queues: ["w-calls"], concurrency: 100, waitMs: 500, handleSignals: false, logger: quiet });
  w.handle("ok", async () => null);
  w.handle("bad", async () => {
    throw noRetry(new Error("bad job"));
  });
  const jobs = Array.from({ length: n }, (_, i) => ({ queue: "w-calls", kind: i % 10 === 0 ? "bad" : "ok" }));
  await client.enqueueMany(jobs);
  const running = w.run();
  await eventually(async () => {
    const q = await client.getQueue("w-calls");
    return q.counts.completed === (n * 9) / 10 && q.counts.dead === n / 10;
  }, 30_000);
  await w.stop();
  await running;
  counting.close();
  assert.equal(counts.ack + counts.fail, 0, JSON.stringify(counts));
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  assert.ok(total / n <= 0.25, JSON.stringify(counts));
});

test("a result over the server's limit fails only its own ack", async () => {
  const small = await startServer({ args: ["--max-payload-bytes", "1024"] });
  const c = new SpoolClient(small.url);
  try {
    const w = new Worker(c, { queues: ["w-big"], concurrency: 2, waitMs: 500, handleSignals: false, logger: quiet });
    w.handle("k", async (job) => (job.payload === "big" ? "x".repeat(2048) : "small result"));
    const big = (await c.enqueue({ queue: "w-big", kind: "k", payload: "big" })).id;
    const kept = (await c.enqueue({ queue: "w-big", kind: "k", payload: "small" })).id;
    const running = w.run();
    const done = await c.awaitJob(kept, { waitMs: 10_000 });
    await w.stop();
    await running;
    assert.equal(done.state, "completed");
    assert.equal(done.attempt, 1);
    assert.equal(done.result, "small result");
    assert.equal((await c.getJob(big)).state, "active"); // its ack was refused, as alone
  } finally {
    c.close();
    await small.stop();
  }
});

test("with runs, each group's jobs end in enqueue order and a failure stops its run", { timeout: 40_000 }, async () => {
  const queue = "w-runs";
  const groups = ["g0", "g1", "g2"];
  await client.setQueueLimits(queue, { ordered: true });
  const ids = (
    await client.enqueueMany(
      Array.from({ length: 20 }, (_, i) =>
        groups.map((g) => ({
          queue,
          kind: "step",
          payload: { g, i },
          group: g,
          max_attempts: 3,
          backoff: { type: "fixed" as const, base_ms: 50, max_ms: 50, jitter: 0 },
        })),
      ).flat(),
    )
  ).map((r) => r.id);
  const started = new Map(groups.map((g) => [g, [] as number[]]));
  const done = new Map(groups.map((g) => [g, [] as number[]]));
  let longest = 0; // the most jobs of one group in one fetch answer
  class CountingClient extends SpoolClient {
    override async fetchJobs(...args: Parameters<SpoolClient["fetchJobs"]>): Promise<Job[]> {
      const jobs = await super.fetchJobs(...args);
      for (const g of groups) longest = Math.max(longest, jobs.filter((j) => j.group === g).length);
      return jobs;
    }
  }
  const w = new Worker(new CountingClient(server.url), { queues: [queue], concurrency: 12, waitMs: 200, handleSignals: false, logger: quiet, runs: true });
  w.handle("step", async (job, ctx) => {
    const { g, i } = job.payload as { g: string; i: number };
    started.get(g)!.push(i);
    await new Promise((r) => setTimeout(r, 1));
    if (g === "g0" && i === 2 && ctx.attempt === 1) throw new Error("first attempt of g0's third job");
    done.get(g)!.push(i);
  });
  const running = w.run();
  try {
    await eventually(() => groups.every((g) => done.get(g)!.length >= 20), 20_000);
  } finally {
    await w.stop();
    await running;
  }
  const inOrder = Array.from({ length: 20 }, (_, i) => i);
  for (const g of groups) assert.deepEqual(done.get(g), inOrder, g);
  // The failure stopped g0's run: its later jobs did not run before the third ran again.
  assert.deepEqual(started.get("g0"), [0, 1, 2, ...inOrder.slice(2)]);
  assert.deepEqual(started.get("g1"), inOrder);
  assert.deepEqual(started.get("g2"), inOrder);
  assert.ok(longest > 1, `the most jobs of one group in one fetch: ${longest}`);
  const jobs = await Promise.all(ids.map((id) => client.getJob(id)));
  assert.ok(jobs.every((j) => j.state === "completed"));
  assert.equal(jobs.reduce((n, j) => n + j.attempt, 0), 61);
});

test("with runs and maxGroups 1, each fetch takes one group's run", { timeout: 40_000 }, async () => {
  const queue = "w-runs-one-group";
  const groups = ["g0", "g1", "g2"];
  await client.setQueueLimits(queue, { ordered: true });
  await client.enqueueMany([0, 1, 2].flatMap((i) => groups.map((g) => ({ queue, kind: "step", payload: { g, i }, group: g }))));
  const answers: string[][] = []; // the groups of each fetch answer with jobs
  class RecordingClient extends SpoolClient {
    override async fetchJobs(...args: Parameters<SpoolClient["fetchJobs"]>): Promise<Job[]> {
      const jobs = await super.fetchJobs(...args);
      if (jobs.length > 0) answers.push([...new Set(jobs.map((j) => j.group!))]);
      return jobs;
    }
  }
  const c = new RecordingClient(server.url);
  const w = new Worker(c, { queues: [queue], concurrency: 9, waitMs: 200, handleSignals: false, logger: quiet, runs: true, maxGroups: 1 });
  const done = new Map(groups.map((g) => [g, [] as number[]]));
  w.handle("step", async (job) => {
    const { g, i } = job.payload as { g: string; i: number };
    done.get(g)!.push(i);
  });
  const running = w.run();
  try {
    await eventually(() => groups.every((g) => done.get(g)!.length >= 3), 20_000);
  } finally {
    await w.stop();
    await running;
    c.close();
  }
  for (const g of groups) assert.deepEqual(done.get(g), [0, 1, 2], g);
  assert.ok(answers.length > 0 && answers.every((gs) => gs.length === 1), JSON.stringify(answers));
});

for (const ordered of [true, false]) {
  test(`with runs, stop hands back the jobs of a run not started (${ordered ? "ordered: the server sends the later ones back with the first" : "not ordered: the worker releases them all"})`, { timeout: 20_000 }, async () => {
    const queue = ordered ? "w-runs-stop" : "w-runs-stop-unordered";
    if (ordered) await client.setQueueLimits(queue, { ordered: true });
    // Leases of 10 minutes: only a release makes the jobs available again within the test.
    const ids = (
      await client.enqueueMany(Array.from({ length: 5 }, (_, i) => ({ queue, kind: "step", payload: i, group: "g", lease_ms: 600_000 })))
    ).map((r) => r.id);
    const w = worker(queue, { concurrency: 10, runs: true });
    const ran: number[] = [];
    let firstRuns!: () => void;
    const first = new Promise<void>((r) => (firstRuns = r));
    let goOn!: () => void;
    const release = new Promise<void>((r) => (goOn = r));
    w.handle("step", async (job) => {
      ran.push(job.payload as number);
      firstRuns();
      await release;
    });
    const running = w.run();
    await first;
    const stopped = w.stop(); // the first job finishes within the grace; the rest wait
    goOn();
    await stopped;
    await running;
    assert.deepEqual(ran, [0]);
    const jobs = await Promise.all(ids.map((id) => client.getJob(id)));
    assert.deepEqual(jobs.map((j) => j.state), ["completed", "available", "available", "available", "available"]);
    assert.deepEqual(jobs.map((j) => j.attempt), [1, 0, 0, 0, 0]);
    assert.equal(w.heldCount, 0);
  });
}

test("with runs, a failure releases the rest of its run on a queue that is not ordered", { timeout: 40_000 }, async () => {
  const queue = "w-runs-unordered";
  // Leases of 10 minutes: only a release makes the jobs available again within the test.
  const ids = (
    await client.enqueueMany(
      Array.from({ length: 5 }, (_, i) => ({
        queue,
        kind: "step",
        payload: i,
        group: "g",
        lease_ms: 600_000,
        max_attempts: 3,
        backoff: { type: "fixed" as const, base_ms: 10, max_ms: 10, jitter: 0 },
      })),
    )
  ).map((r) => r.id);
  let released!: () => void;
  const releasedOnce = new Promise<void>((r) => (released = r));
  class NotingClient extends SpoolClient {
    override async releaseMany(...args: Parameters<SpoolClient["releaseMany"]>): ReturnType<SpoolClient["releaseMany"]> {
      const results = await super.releaseMany(...args);
      released();
      return results;
    }
  }
  const w = new Worker(new NotingClient(server.url), { queues: [queue], concurrency: 5, waitMs: 200, handleSignals: false, logger: quiet, runs: true });
  const done: number[] = [];
  w.handle("step", async (job, ctx) => {
    if (job.payload === 1 && ctx.attempt === 1) {
      // The queue paused, the worker fetches nothing more: the released
      // jobs stay available for the test to see.
      await client.pauseQueue(queue);
      throw new Error("first attempt of the second job");
    }
    done.push(job.payload as number);
  });
  const running = w.run();
  try {
    await releasedOnce;
    const later = await Promise.all(ids.slice(2).map((id) => client.getJob(id)));
    assert.deepEqual(later.map((j) => j.state), ["available", "available", "available"]);
    assert.deepEqual(later.map((j) => (j.errors ?? []).length), [0, 0, 0]);
    await client.resumeQueue(queue);
    await eventually(() => done.length === 5, 20_000);
  } finally {
    await w.stop();
    await running;
  }
  assert.deepEqual([...done].sort(), [0, 1, 2, 3, 4]);
  const jobs = await Promise.all(ids.map((id) => client.getJob(id)));
  assert.deepEqual(jobs.map((j) => j.state), ["completed", "completed", "completed", "completed", "completed"]);
  assert.deepEqual(jobs.map((j) => (j.errors ?? []).length), [0, 1, 0, 0, 0]);
});
