import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  SpoolClient,
  SpoolError,
  InvalidArgumentError,
  InvalidJSONError,
  NotFoundError,
  LeaseLostError,
  InvalidStateError,
  IdTakenError,
  JOB_FIELDS,
  ERROR_CODES,
  type Job,
} from "../src/index.js";
import { startServer, repoRoot, type Server } from "./server.js";

let server: Server;
let client: SpoolClient;

before(async () => {
  server = await startServer();
  client = new SpoolClient(server.url);
});
after(async () => {
  await server?.stop();
});

test("Job type knows every property of api/openapi.json's Job schema", () => {
  const doc = JSON.parse(readFileSync(join(repoRoot, "api/openapi.json"), "utf8"));
  const documented = Object.keys(doc.components.schemas.Job.properties).sort();
  assert.deepEqual([...JOB_FIELDS].sort(), documented, "update Job and JOB_FIELDS in src/types.ts");
  // Every key of the Job interface is in JOB_FIELDS (checked by the compiler).
  type Missing = Exclude<keyof Job, (typeof JOB_FIELDS)[number]>;
  const complete: [Missing] extends [never] ? true : false = true;
  assert.ok(complete);
});

test("every error code of the catalog has its class", () => {
  const doc = JSON.parse(readFileSync(join(repoRoot, "api/openapi.json"), "utf8"));
  assert.deepEqual(Object.keys(ERROR_CODES).sort(), [...doc.components.schemas.ErrorCode.enum].sort());
});

test("enqueue with every job option, then get", async () => {
  const runAt = new Date(Date.now() + 3_600_000);
  const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  const res = await client.enqueue({
    id: "opts-1",
    queue: "c-opts",
    kind: "send_welcome",
    payload: { user: 42 },
    priority: 5,
    run_at: runAt,
    max_attempts: 3,
    backoff: { type: "fixed", base_ms: 500, max_ms: 500, jitter: 0 },
    lease_ms: 2_000,
    unique_key: "welcome-42",
    unique_for_ms: 60_000,
    tags: ["signup", "eu"],
    group: "tenant-42",
    durability: "process",
    traceparent: tp,
  });
  assert.deepEqual(res, { id: "opts-1", state: "scheduled", duplicate: false });
  const job = await client.getJob("opts-1");
  assert.equal(job.queue, "c-opts");
  assert.equal(job.kind, "send_welcome");
  assert.deepEqual(job.payload, { user: 42 });
  assert.equal(job.priority, 5);
  assert.equal(new Date(job.run_at).getTime(), runAt.getTime());
  assert.equal(job.max_attempts, 3);
  assert.deepEqual(job.backoff, { type: "fixed", base_ms: 500, max_ms: 500, jitter: 0 });
  assert.equal(job.lease_ms, 2_000);
  assert.equal(job.unique_key, "welcome-42");
  assert.equal(job.unique_for_ms, 60_000);
  assert.deepEqual(job.tags, ["signup", "eu"]);
  assert.equal(job.group, "tenant-42");
  assert.equal(job.durability, "process");
  assert.equal(job.traceparent, tp);

  const again = await client.enqueue({ id: "opts-1", queue: "c-opts", kind: "send_welcome" });
  assert.equal(again.duplicate, true);
  const delayed = await client.enqueue({ queue: "c-opts", kind: "k", delay_ms: 60_000 });
  assert.equal(delayed.state, "scheduled");
  await assert.rejects(client.enqueue({ id: "opts-1", queue: "c-other", kind: "k" }), IdTakenError);
});

test("enqueueMany is atomic and answers in order", async () => {
  const res = await client.enqueueMany([
    { queue: "c-batch", kind: "a" },
    { queue: "c-batch", kind: "b", id: "batch-b" },
  ]);
  assert.equal(res.length, 2);
  assert.equal(res[1].id, "batch-b");
  const err = await client.enqueueMany([{ queue: "c-batch", kind: "a" }, { queue: "c-batch", kind: "" }]).catch((e) => e);
  assert.ok(err instanceof InvalidArgumentError);
  assert.equal(err.field, "jobs[1].kind");
  const list = await client.listJobs({ queue: "c-batch" });
  assert.equal(list.jobs.length, 2);
});

test("a bad field is an InvalidArgumentError naming it", async () => {
  const err = await client.enqueue({ queue: "c-bad", kind: "k", priority: 5000 }).catch((e) => e);
  assert.ok(err instanceof InvalidArgumentError, String(err));
  assert.ok(err instanceof SpoolError);
  assert.equal(err.code, "invalid_argument");
  assert.equal(err.status, 400);
  assert.equal(err.field, "priority");
  assert.equal(err.name, "InvalidArgumentError");
  const bad = await client.enqueue({ queue: "bad queue", kind: "k" }).catch((e) => e);
  assert.ok(bad instanceof InvalidArgumentError);
  assert.equal(bad.field, "queue");
  const unknown = await client.request("POST", "/v1/jobs", { body: { kind: "k", Kind: "x" } }).catch((e) => e);
  assert.ok(unknown instanceof InvalidJSONError);
  await assert.rejects(client.getJob("no-such-job"), NotFoundError);
});

test("lease expiry: the job goes to the next fetch and the stale token is refused", async () => {
  const { id } = await client.enqueue({ queue: "c-lease", kind: "k", lease_ms: 1_000 });
  const [first] = await client.fetchJobs({ queues: ["c-lease"], worker: "w1" });
  assert.equal(first.id, id);
  assert.equal(first.attempt, 1);
  const oldToken = first.lease!.token;
  const [second] = await client.fetchJobs({ queues: ["c-lease"], wait_ms: 5_000, worker: "w2" });
  assert.equal(second?.id, id, "the job comes back once its lease ran out");
  assert.equal(second.attempt, 2);
  assert.ok(second.lease!.token > oldToken);
  const err = await client.ack(id, oldToken, { late: true }).catch((e) => e);
  assert.ok(err instanceof LeaseLostError, String(err));
  assert.equal(err.status, 409);
  const ext = await client.extendMany([{ id, token: oldToken }, { id, token: second.lease!.token }]);
  assert.ok(ext[0] instanceof LeaseLostError);
  assert.ok(!(ext[1] instanceof SpoolError) && ext[1].cancel_requested === false);
  assert.equal((await client.ack(id, second.lease!.token, "ok")).state, "completed");
  assert.equal((await client.getJob(id)).result, "ok");
});

test("fail, release, progress, cancel, retry and delete", async () => {
  const { id } = await client.enqueue({ queue: "c-manage", kind: "k", max_attempts: 2 });
  let [job] = await client.fetchJobs({ queues: ["c-manage"] });
  await client.progress(id, job.lease!.token, { pct: 50 });
  assert.deepEqual((await client.getJob(id)).progress, { pct: 50 });
  assert.equal((await client.release(id, job.lease!.token)).state, "available");
  assert.equal((await client.getJob(id)).attempt, 0);
  [job] = await client.fetchJobs({ queues: ["c-manage"] });
  const failed = await client.fail(id, job.lease!.token, "boom", { no_retry: true });
  assert.equal(failed.state, "dead");
  await assert.rejects(client.cancelJob(id), InvalidStateError);
  const retried = await client.retryJob(id);
  assert.equal(retried.state, "available");
  assert.equal(retried.attempt, 0);
  const cancelled = await client.cancelJob(id);
  assert.equal(cancelled.state, "cancelled");
  await client.deleteJob(id);
  await assert.rejects(client.getJob(id), NotFoundError);
});

test("getJob with wait_ms, awaitJob and enqueueAndWait", async () => {
  const waiting = client.enqueueAndWait({ queue: "c-await", kind: "k", id: "await-1" }, { waitMs: 10_000 });
  let job: Job | undefined;
  while (!job) [job] = await client.fetchJobs({ queues: ["c-await"], wait_ms: 1_000 });
  await client.ack(job.id, job.lease!.token, { answer: 42 });
  const done = await waiting;
  assert.equal(done.state, "completed");
  assert.deepEqual(done.result, { answer: 42 });

  await client.enqueue({ queue: "c-await", kind: "k", id: "await-2" });
  const t0 = Date.now();
  const still = await client.getJob("await-2", { wait_ms: 300 });
  assert.equal(still.state, "available");
  assert.ok(Date.now() - t0 >= 250);
  await assert.rejects(client.awaitJob("await-2", { waitMs: 300 }), { name: "TimeoutError" });
});

test("queue admin: updates change what they name and keep the rest", async () => {
  await client.setQueueSettings("c-patch", { dead_letter_queue: "c-patch-dlq", max_wait_ms: 600_000 });
  let q = await client.updateQueueSettings("c-patch", { default_lease_ms: 300_000 });
  assert.deepEqual(q.settings, { dead_letter_queue: "c-patch-dlq", max_wait_ms: 600_000, default_lease_ms: 300_000 });
  q = await client.updateQueueSettings("c-patch", { max_wait_ms: null, default_max_attempts: 4 });
  assert.deepEqual(q.settings, { dead_letter_queue: "c-patch-dlq", default_lease_ms: 300_000, default_max_attempts: 4 });
  const err = await client.updateQueueSettings("c-patch", { dead_letter_queue: "c-patch", default_lease_ms: null }).catch((e) => e);
  assert.ok(err instanceof InvalidArgumentError);
  assert.equal(err.field, "dead_letter_queue");
  assert.deepEqual((await client.getQueue("c-patch")).settings, q.settings);
  await client.setQueueLimits("c-patch", { rate: { limit: 50, period_ms: 1_000 }, max_active: 20 });
  q = await client.updateQueueLimits("c-patch", { rate: { limit: 100 }, max_active: null, group_max_active: 2 });
  assert.deepEqual(q.limits, { rate: { limit: 100, period_ms: 1_000 }, group_max_active: 2 });
});

test("queue admin: pause, resume, durability, limits, settings, purge", async () => {
  await client.enqueue({ queue: "c-admin", kind: "k" });
  assert.equal((await client.pauseQueue("c-admin")).paused, true);
  assert.deepEqual(await client.fetchJobs({ queues: ["c-admin"] }), []);
  assert.equal((await client.resumeQueue("c-admin")).paused, false);
  assert.equal((await client.setQueueDurability("c-admin", "process")).durability, "process");
  const limited = await client.setQueueLimits("c-admin", { max_active: 2, rate: { limit: 10, period_ms: 1_000 } });
  assert.deepEqual(limited.limits, { max_active: 2, rate: { limit: 10, period_ms: 1_000 } });
  assert.equal((await client.deleteQueueLimits("c-admin")).limits, undefined);
  const set = await client.setQueueSettings("c-admin", { max_wait_ms: 60_000, default_max_attempts: 4 });
  assert.deepEqual(set.settings, { max_wait_ms: 60_000, default_max_attempts: 4 });
  assert.equal((await client.deleteQueueSettings("c-admin")).settings, undefined);
  const err = await client.setQueueSettings("c-admin", { dead_letter_queue: "c-admin" }).catch((e) => e);
  assert.ok(err instanceof InvalidArgumentError);
  assert.equal(err.field, "dead_letter_queue");
  assert.equal((await client.getQueue("c-admin")).counts.available, 1);
  assert.ok((await client.listQueues()).some((q) => q.name === "c-admin"));
  assert.equal(await client.purgeQueue("c-admin"), 1);
  await client.health();
  await client.ready();
});

test("a fetch of runs takes a free ordered group's jobs in enqueue order; without runs one", { timeout: 20_000 }, async () => {
  for (const queue of ["c-runs-one", "c-runs-run"]) {
    await client.setQueueLimits(queue, { ordered: true });
    await client.enqueueMany(Array.from({ length: 5 }, (_, i) => ({ queue, kind: "k", payload: i, group: "g" })));
  }
  const one = await client.fetchJobs({ queues: ["c-runs-one"], max: 10 });
  assert.deepEqual(one.map((j) => j.payload), [0]);
  const run = await client.fetchJobs({ queues: ["c-runs-run"], max: 10, runs: true });
  assert.deepEqual(run.map((j) => j.payload), [0, 1, 2, 3, 4]);
  assert.equal(new Set(run.map((j) => j.lease!.token)).size, 5);
});

test("a fetch of runs with max_groups 1 takes one group's run, whichever group", { timeout: 20_000 }, async () => {
  const queue = "c-runs-one-group";
  const groups = ["g0", "g1", "g2"];
  await client.setQueueLimits(queue, { ordered: true });
  const specs = [0, 1, 2].flatMap((i) => groups.map((group) => ({ queue, kind: "k", payload: i, group })));
  const ids = new Map<string, string[]>(groups.map((g) => [g, []]));
  (await client.enqueueMany(specs)).forEach((r, n) => ids.get(specs[n].group)!.push(r.id));
  const run = await client.fetchJobs({ queues: [queue], max: 10, runs: true, max_groups: 1 });
  assert.ok(run.length > 0);
  assert.deepEqual(
    run.map((j) => j.id),
    ids.get(run[0].group!),
  );
  for (const bad of [0, 1001]) {
    const err = await client.fetchJobs({ queues: [queue], max: 10, runs: true, max_groups: bad }).catch((e) => e);
    assert.ok(err instanceof InvalidArgumentError, String(err));
    assert.equal(err.field, "max_groups");
  }
});
