import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { SpoolClient, UnauthorizedError, ForbiddenError, SpoolError } from "../src/index.js";
import { startServer, type Server } from "./server.js";

const adminSecret = "ts-admin-secret-0123456789abcdef";
const readerSecret = "ts-reader-secret-0123456789abcdef";
let server: Server;

before(async () => {
  server = await startServer({
    args: ["--auth"],
    env: { SPOOL_AUTH_TOKENS: `ts-admin admin * ${adminSecret}; ts-reader read-only * ${readerSecret}` },
  });
});
after(async () => {
  await server?.stop();
});

test("no token is an UnauthorizedError", async () => {
  const anonymous = new SpoolClient(server.url);
  const err = await anonymous.enqueue({ kind: "k" }).catch((e) => e);
  assert.ok(err instanceof UnauthorizedError, String(err));
  assert.ok(err instanceof SpoolError);
  assert.equal(err.status, 401);
  assert.equal(err.code, "unauthorized");
  await anonymous.health(); // public
  const wrong = new SpoolClient(server.url, { token: "not-a-known-secret-at-all" });
  await assert.rejects(wrong.listQueues(), UnauthorizedError);
});

test("a read-only token may read but not enqueue: ForbiddenError", async () => {
  const admin = new SpoolClient(server.url, { token: adminSecret });
  const reader = new SpoolClient(server.url, { token: readerSecret });
  const { id } = await admin.enqueue({ queue: "auth-q", kind: "k" });
  assert.equal((await reader.getJob(id)).id, id);
  const err = await reader.enqueue({ queue: "auth-q", kind: "k" }).catch((e) => e);
  assert.ok(err instanceof ForbiddenError, String(err));
  assert.equal(err.status, 403);
  await assert.rejects(reader.fetchJobs({ queues: ["auth-q"] }), ForbiddenError);
});
