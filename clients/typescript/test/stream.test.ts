import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { SpoolClient, NotFoundError } from "../src/index.js";
import { startServer, eventually, type Server } from "./server.js";

let server: Server;

before(async () => {
  server = await startServer();
});
after(async () => {
  await server?.stop();
});

const upgrades = 'spool_http_requests_total{code="101",route="GET /v1/stream"}';

async function metric(series: string): Promise<number> {
  const text = await (await fetch(server.url + "/metrics")).text();
  const line = text.split("\n").find((l) => l.startsWith(series + " "));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

test("calls go over one stream, with the answers and errors of HTTP", async () => {
  const before = await metric(upgrades);
  const c = new SpoolClient(server.url);
  const ids = await Promise.all(Array.from({ length: 20 }, (_, i) => c.enqueue({ queue: "s-one", kind: "k", payload: i })));
  const jobs = await c.fetchJobs({ queues: ["s-one"], max: 20 });
  assert.deepEqual(jobs.map((j) => j.payload).sort((a, b) => Number(a) - Number(b)), Array.from({ length: 20 }, (_, i) => i));
  const results = await c.ackMany(jobs.map((j) => ({ id: j.id, token: j.lease!.token })));
  assert.ok(results.every((r) => !(r instanceof Error) && r.state === "completed"));
  const err = await c.getJob("no-such-job").catch((e) => e);
  assert.ok(err instanceof NotFoundError, String(err));
  assert.equal(new Set(ids.map((r) => r.id)).size, 20);
  c.close();
  // The server counts a stream once it has closed.
  await eventually(async () => (await metric(upgrades)) === before + 1);
});

test("an aborted long poll hands back what it claimed", async () => {
  const c = new SpoolClient(server.url);
  const other = new SpoolClient(server.url);
  const abort = new AbortController();
  const poll = c.fetchJobs({ queues: ["s-abort"], wait_ms: 20_000 }, { signal: abort.signal });
  await new Promise((r) => setTimeout(r, 200));
  abort.abort(new Error("given up"));
  await assert.rejects(poll, /given up/);
  const { id } = await other.enqueue({ queue: "s-abort", kind: "k" });
  const jobs = await other.fetchJobs({ queues: ["s-abort"], wait_ms: 5_000 });
  assert.deepEqual(jobs.map((j) => j.id), [id]);
  assert.equal((await c.getJob(id)).state, "active"); // the stream still serves c
  c.close();
  other.close();
});

test("a broken stream is dialled again", async () => {
  const c = new SpoolClient(server.url);
  await c.enqueue({ queue: "s-broken", kind: "k" });
  c.close(); // as when the connection drops
  assert.equal((await c.getQueue("s-broken")).counts.available, 1);
  c.close();
});

test("a server without the stream gets HTTP for good", async () => {
  // A server (or proxy) that does not know the upgrade answers it 404: the
  // client sends that call and every later one over HTTP, dialling no more.
  const seen: string[] = [];
  const fake = createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    res.setHeader("Content-Type", "application/json");
    if (req.url === "/v1/stream") {
      res.statusCode = 404;
      res.end('{"error":{"code":"not_found","message":"no route"}}');
      return;
    }
    res.end('{"name":"q","paused":false,"durability":"full","counts":{"available":3}}');
  });
  await new Promise<void>((r) => fake.listen(0, "127.0.0.1", r));
  try {
    const c = new SpoolClient(`http://127.0.0.1:${(fake.address() as AddressInfo).port}`);
    assert.equal((await c.getQueue("q")).counts.available, 3);
    assert.equal((await c.getQueue("q")).counts.available, 3);
    assert.deepEqual(seen, ["GET /v1/stream", "GET /v1/queues/q", "GET /v1/queues/q"]);
  } finally {
    fake.closeAllConnections();
    await new Promise((r) => fake.close(r));
  }
});

test("a client given a fetch speaks HTTP through it", async () => {
  const sent: string[] = [];
  const c = new SpoolClient(server.url, {
    fetch: async (url, init) => {
      sent.push(String(url));
      return fetch(url, init);
    },
  });
  await c.enqueue({ queue: "s-fetch", kind: "k" });
  assert.deepEqual(sent, [server.url + "/v1/jobs"]);
});
