// Runs the welcome jobs of the queue emails: the TypeScript worker of the
// README's tour. SPOOL_SERVER names the server (default http://127.0.0.1:7311).
import { SpoolClient, Worker } from "@spoolq/client";

const client = new SpoolClient(process.env.SPOOL_SERVER ?? "http://127.0.0.1:7311");
const worker = new Worker(client, { queues: ["emails"], concurrency: 10 });
worker.handle("welcome", async (job, { signal }) => { // signal aborts on cancel
  const { user } = job.payload as { user: number };
  console.log(`welcoming user ${user} (attempt ${job.attempt})`);
  return { sent: true };
});
await worker.run(); // until SIGTERM/SIGINT, then finishes or hands back its jobs
