// The TypeScript side of the cross-language test (scripts/test-sdks-together).
//
// `node ts_side.mjs worker`: runs a TypeScript worker on queue sdk-ts until
// SIGTERM; each job of kind `add` answers {sum: a + b, by: "typescript"}.
// `node ts_side.mjs produce N`: enqueues N jobs of kind `add` into queue
// sdk-py (run by the Python worker), waits for each, and exits non-zero
// unless every result is the Python worker's right sum.
import { SpoolClient, Worker } from "../../clients/typescript/dist/index.js";

const client = new SpoolClient(process.env.SPOOL_URL, { token: process.env.SPOOL_TOKEN });

if (process.argv[2] === "worker") {
  const worker = new Worker(client, { queues: ["sdk-ts"], concurrency: 8, name: "typescript-worker", waitMs: 1000, shutdownTimeoutMs: 5000 });
  worker.handle("add", async (job) => ({ sum: job.payload.a + job.payload.b, by: "typescript" }));
  await worker.run();
} else {
  const n = Number(process.argv[3]);
  const ids = [];
  for (let i = 0; i < n; i++) {
    ids.push((await client.enqueue({ queue: "sdk-py", kind: "add", payload: { a: i, b: 2000 } })).id);
  }
  for (const [i, id] of ids.entries()) {
    const job = await client.awaitJob(id, { waitMs: 30_000 });
    const want = { sum: i + 2000, by: "python" };
    if (job.state !== "completed" || JSON.stringify(job.result) !== JSON.stringify(want)) {
      console.error(`FAIL: job ${id}: ${job.state} ${JSON.stringify(job.result)}, want completed ${JSON.stringify(want)}`);
      process.exit(1);
    }
  }
  console.log(`ok: ${n} jobs enqueued from TypeScript were run by the Python worker`);
}
