import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { SpoolClient, LeaseLostError, NotFoundError, InvalidArgumentError } from "../src/index.js";
import { startServer, type Server } from "./server.js";

let server: Server;
let client: SpoolClient;

before(async () => {
  server = await startServer();
  client = new SpoolClient(server.url);
});
after(async () => {
  await server?.stop();
});

test("schedules: put, get, list, pause, resume, trigger, delete", async () => {
  const def = { job: { queue: "a-sched", kind: "report", payload: { period: "daily" } }, cron: "0 3 * * *", timezone: "Europe/Berlin" };
  const created = await client.putSchedule("nightly", def);
  assert.equal(created.name, "nightly");
  assert.equal(created.cron, "0 3 * * *");
  assert.equal(created.misfire, "skip");
  assert.deepEqual(created.job, def.job);
  assert.ok(created.next_run_at);
  assert.equal((await client.pauseSchedule("nightly")).paused, true);
  assert.equal((await client.resumeSchedule("nightly")).paused, false);
  const fired = await client.triggerSchedule("nightly");
  assert.equal(fired.job.state, "available");
  assert.equal(fired.schedule.last_job_id, fired.job.id);
  assert.equal((await client.getJob(fired.job.id)).kind, "report");
  assert.deepEqual((await client.listSchedules()).map((s) => s.name), ["nightly"]);
  const err = await client.putSchedule("bad", { job: { kind: "k" }, every_ms: 10 }).catch((e) => e);
  assert.ok(err instanceof InvalidArgumentError);
  assert.equal(err.field, "every_ms");
  await client.deleteSchedule("nightly");
  await assert.rejects(client.getSchedule("nightly"), NotFoundError);
});

test("consumer groups: every group gets its own copy", async () => {
  const g = await client.createConsumerGroup("a-cg", "billing", { start: "new" });
  assert.equal(g.name, "billing");
  assert.equal(g.pending, 0);
  const { id } = await client.enqueue({ queue: "a-cg", kind: "order.placed", payload: { order: 1 } });
  const [copy] = await client.fetchJobs({ queues: ["a-cg"], consumer_group: "billing" });
  assert.equal(copy.id, `${id}@billing`);
  assert.equal(copy.consumer_group, "billing");
  await client.ack(copy.id, copy.lease!.token);
  const list = await client.listConsumerGroups("a-cg");
  assert.equal(list.length, 1);
  assert.equal(list[0].counts.completed, 1);
  const replay = await client.seekConsumerGroup("a-cg", "billing", { start: "beginning" });
  assert.equal(replay.replayed, 1);
  assert.equal((await client.getConsumerGroup("a-cg", "billing")).pending, 1);
  await client.deleteConsumerGroup("a-cg", "billing");
  await assert.rejects(client.getConsumerGroup("a-cg", "billing"), NotFoundError);
});

test("transactions ack and enqueue together, or do nothing", async () => {
  await client.enqueue({ queue: "a-tx", kind: "step1", id: "tx-1" });
  const [job] = await client.fetchJobs({ queues: ["a-tx"], worker: "tx-worker" });
  assert.ok((await client.listWorkers()).some((w) => w.name === "tx-worker" && w.active === 1));
  const res = await client.transact({
    ack: [{ id: job.id, token: job.lease!.token, result: { rows: 3 } }],
    enqueue: [{ queue: "a-tx", kind: "step2", id: "tx-2" }],
  });
  assert.deepEqual(res.acked, [{ id: "tx-1", state: "completed" }]);
  assert.equal(res.jobs[0].id, "tx-2");
  assert.deepEqual(res.failed, []);
  const again = await client
    .transact({ ack: [{ id: job.id, token: job.lease!.token }], enqueue: [{ queue: "a-tx", kind: "step3", id: "tx-3" }] })
    .catch((e) => e);
  assert.ok(again instanceof LeaseLostError);
  assert.equal(again.field, "ack[0].token");
  await assert.rejects(client.getJob("tx-3"), NotFoundError);
});

test("queue-wide retry and delete by state", async () => {
  const { id } = await client.enqueue({ queue: "a-bulk", kind: "k", max_attempts: 1 });
  const [job] = await client.fetchJobs({ queues: ["a-bulk"] });
  await client.fail(id, job.lease!.token, "boom");
  assert.equal((await client.getJob(id)).state, "dead");
  assert.equal(await client.retryQueueJobs("a-bulk", "dead"), 1);
  assert.equal((await client.getJob(id)).state, "available");
  await client.cancelJob(id);
  assert.equal(await client.deleteQueueJobs("a-bulk", "cancelled"), 1);
  const seen = [];
  for await (const j of client.jobs({ queue: "a-bulk" })) seen.push(j);
  assert.equal(seen.length, 0);
});
