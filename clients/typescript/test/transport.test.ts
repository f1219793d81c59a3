// The client's retries and timeouts, against a fake fetch.
import { test } from "node:test";
import assert from "node:assert/strict";
import { SpoolClient, UnavailableError, StorageFullError, SpoolError } from "../src/index.js";

function fakeFetch(answers: (() => Response | Promise<Response>)[]) {
  const calls: { url: string; init: RequestInit }[] = [];
  const fn = (async (url: string, init: RequestInit) => {
    calls.push({ url, init });
    const next = answers[Math.min(calls.length - 1, answers.length - 1)];
    return next();
  }) as unknown as typeof fetch;
  return { fn, calls };
}

const unavailable = () =>
  new Response(JSON.stringify({ error: { code: "unavailable", message: "shutting down" } }), { status: 503 });
const job = () => new Response(JSON.stringify({ id: "a", state: "available", duplicate: false }), { status: 201 });

test("idempotent calls are retried after 5xx; others are not", async () => {
  let f = fakeFetch([unavailable, job]);
  let c = new SpoolClient("http://spool.test/", { fetch: f.fn, token: "secret-token-1234567" });
  assert.equal((await c.enqueue({ id: "a", kind: "k" })).id, "a");
  assert.equal(f.calls.length, 2, "an enqueue with an id is retried");
  assert.equal(f.calls[0].url, "http://spool.test/v1/jobs");
  assert.equal((f.calls[0].init.headers as Record<string, string>).Authorization, "Bearer secret-token-1234567");

  f = fakeFetch([unavailable, job]);
  c = new SpoolClient("http://spool.test", { fetch: f.fn });
  await assert.rejects(c.enqueue({ kind: "k" }), UnavailableError);
  assert.equal(f.calls.length, 1, "an enqueue without an id is sent once");

  f = fakeFetch([unavailable]);
  c = new SpoolClient("http://spool.test", { fetch: f.fn, retries: 2 });
  await assert.rejects(c.getJob("a"), UnavailableError);
  assert.equal(f.calls.length, 3, "a GET is tried 1 + retries times");

  f = fakeFetch([() => new Response(JSON.stringify({ error: { code: "storage_full", message: "disk full" } }), { status: 507 })]);
  c = new SpoolClient("http://spool.test", { fetch: f.fn, retries: 0 });
  const err = await c.getJob("a").catch((e) => e);
  assert.ok(err instanceof StorageFullError);
  assert.equal(err.status, 507);
});

test("an answer that is no Spool error still is a SpoolError with its status", async () => {
  const f = fakeFetch([() => new Response("<html>bad gateway</html>", { status: 502 })]);
  const c = new SpoolClient("http://spool.test", { fetch: f.fn, retries: 0 });
  const err = await c.listQueues().catch((e) => e);
  assert.ok(err instanceof SpoolError);
  assert.equal(err.code, "");
  assert.equal(err.status, 502);
  assert.match(err.message, /bad gateway/);
});

test("timeouts abort a call; a long poll's wait is added to the timeout", async () => {
  const hang = (init: RequestInit) =>
    new Promise<Response>((_, reject) => init.signal!.addEventListener("abort", () => reject(init.signal!.reason)));
  const calls: number[] = [];
  const fn = (async (_url: string, init: RequestInit) => {
    calls.push(Date.now());
    return hang(init);
  }) as unknown as typeof fetch;
  const c = new SpoolClient("http://spool.test", { fetch: fn, timeoutMs: 100, retries: 0 });
  const t0 = Date.now();
  await assert.rejects(c.getJob("a"), { name: "TimeoutError" });
  assert.ok(Date.now() - t0 < 1_000);
  const t1 = Date.now();
  await assert.rejects(c.fetchJobs({ queues: ["q"], wait_ms: 300 }), { name: "TimeoutError" });
  assert.ok(Date.now() - t1 >= 380, "waited for the long poll plus the timeout");
  const ctl = new AbortController();
  setTimeout(() => ctl.abort(new Error("caller gave up")), 50);
  await assert.rejects(c.getJob("a", { signal: ctl.signal, timeoutMs: 5_000 }), /caller gave up/);
});

test("a fetch sends runs only when it is true", async () => {
  const jobs = () => new Response(JSON.stringify({ jobs: [] }), { status: 200 });
  const f = fakeFetch([jobs]);
  const c = new SpoolClient("http://spool.test", { fetch: f.fn });
  await c.fetchJobs({ queues: ["q"] });
  await c.fetchJobs({ queues: ["q"], runs: false });
  await c.fetchJobs({ queues: ["q"], runs: true });
  const bodies = f.calls.map((call) => JSON.parse(call.init.body as string));
  assert.deepEqual(bodies, [{ queues: ["q"] }, { queues: ["q"] }, { queues: ["q"], runs: true }]);
});

test("a fetch sends max_groups only when set", async () => {
  const jobs = () => new Response(JSON.stringify({ jobs: [] }), { status: 200 });
  const f = fakeFetch([jobs]);
  const c = new SpoolClient("http://spool.test", { fetch: f.fn });
  await c.fetchJobs({ queues: ["q"] });
  await c.fetchJobs({ queues: ["q"], runs: true, max_groups: 1 });
  const bodies = f.calls.map((call) => JSON.parse(call.init.body as string));
  assert.deepEqual(bodies, [{ queues: ["q"] }, { queues: ["q"], runs: true, max_groups: 1 }]);
});
