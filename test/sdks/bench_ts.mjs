// Drains a queue of no-op jobs with the TypeScript SDK's Worker (one
// process) and prints the rate, for scripts/bench-sdks.
import { SpoolClient, Worker } from "../../clients/typescript/dist/index.js";

const [queue, jobs, concurrency] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
const client = new SpoolClient(process.env.SPOOL_URL);
const worker = new Worker(client, { queues: [queue], concurrency, name: "bench-typescript", waitMs: 1000, handleSignals: false });
worker.handle("noop", async () => null);
const start = performance.now();
const run = worker.run();
for (;;) {
  const q = await client.getQueue(queue);
  if ((q.counts.completed ?? 0) >= jobs) break;
  await new Promise((r) => setTimeout(r, 50));
}
const elapsed = (performance.now() - start) / 1000;
await worker.stop();
await run;
console.log(`typescript ${jobs} ${elapsed.toFixed(3)} ${(jobs / elapsed).toFixed(0)}`);
