// bullmq.mjs runs one benchmark case against BullMQ on Redis through
// BullMQ's own Queue and Worker, with their defaults, and prints one JSON
// line shaped like comparebench's (see cases.go for the workloads).
//
//   node bullmq.mjs --case seq --n 5000 --redis 127.0.0.1:6379 [--label bullmq]
//        [--rep 1] [--lat-rate 1000] [--lat-duration 5] [--timeout 120]
import { Queue, Worker } from "bullmq";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, a, i, all) => (a.startsWith("--") ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []),
);
const caseName = args.case;
const n = Number(args.n ?? 1000);
const [host, port] = (args.redis ?? "").split(":");
const label = args.label ?? "bullmq";
const latRate = Number(args["lat-rate"] ?? 1000);
const latSeconds = Number(args["lat-duration"] ?? 5);
const timeoutSeconds = Number(args.timeout ?? 120);

const QUEUE = "bench";
const KIND = "noop";
const BATCH = 1000;
const MAX_IN_FLIGHT = 256;
const PAD = "x".repeat(60);
// A Worker's blocking connection needs maxRetriesPerRequest null.
const connection = { host, port: Number(port), maxRetriesPerRequest: null };

// nowNs is wall-clock time in nanoseconds, comparable across the job's trip.
const origin = BigInt(Date.now()) * 1000000n - process.hrtime.bigint();
const nowNs = () => Number(origin + process.hrtime.bigint());
const newArgs = (seq) => ({ seq, sent: nowNs(), pad: PAD });

const result = { system: label, case: caseName, rep: Number(args.rep ?? 1) };
const record = (count, seconds) => Object.assign(result, { n: count, seconds, jobs_per_s: count / seconds });

const queue = new Queue(QUEUE, { connection });

// enqueueCase times n single adds spread over the given producers.
async function enqueueCase(producers) {
  let next = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: producers }, async () => {
      while (next < n) {
        const seq = ++next;
        await queue.add(KIND, newArgs(seq));
      }
    }),
  );
  record(n, (performance.now() - start) / 1000);
}

async function addInBatches(count) {
  for (let first = 0; first < count; first += BATCH) {
    const jobs = [];
    for (let seq = first; seq < Math.min(first + BATCH, count); seq++) jobs.push({ name: KIND, data: newArgs(seq) });
    await queue.addBulk(jobs);
  }
}

async function bulkCase() {
  const start = performance.now();
  await addInBatches(n);
  record(n, (performance.now() - start) / 1000);
}

// work starts a Worker whose handler calls started with each job's data.
function work(concurrency, started) {
  return new Worker(QUEUE, async (job) => started(job.data), { connection, concurrency });
}

// drainCase prefills n jobs, then times a worker until its handlers began all n.
async function drainCase(concurrency) {
  await addInBatches(n);
  let handled = 0;
  let start;
  await new Promise((resolve) => {
    start = performance.now();
    const w = work(concurrency, () => {
      if (++handled === n) resolve();
    });
    result.stop = () => w.close();
  });
  record(n, (performance.now() - start) / 1000);
}

// latencyCase enqueues at a steady rate without waiting for each add, and
// measures from just before each add to its handler's start.
async function latencyCase() {
  const total = Math.round(latRate * latSeconds);
  const lat = [];
  let allBegun;
  const begun = new Promise((resolve) => (allBegun = resolve));
  const w = work(50, (data) => {
    lat.push((nowNs() - data.sent) / 1e6);
    if (lat.length === total) allBegun();
  });
  result.stop = () => w.close();
  await w.waitUntilReady();
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const start = performance.now();
  const inFlight = new Set();
  for (let i = 0; i < total; i++) {
    const wait = start + (i * 1000) / latRate - performance.now();
    if (wait > 1) await sleep(wait);
    while (inFlight.size >= MAX_IN_FLIGHT) await Promise.race(inFlight);
    const p = queue.add(KIND, newArgs(i)).finally(() => inFlight.delete(p));
    inFlight.add(p);
  }
  await Promise.all(inFlight);
  result.rate = total / ((performance.now() - start) / 1000);
  await begun;
  result.n = total;
  result.seconds = (performance.now() - start) / 1000;
  lat.sort((a, b) => a - b);
  result.p50_ms = lat[Math.floor(total / 2)];
  result.p99_ms = lat[Math.floor((total * 99) / 100)];
}

const cases = {
  seq: () => enqueueCase(1),
  conc: () => enqueueCase(50),
  bulk: bulkCase,
  drain50: () => drainCase(50),
  drain500: () => drainCase(500),
  lat: latencyCase,
};

async function main() {
  if (!cases[caseName]) throw new Error(`--case: unknown case ${caseName}`);
  if (!host || !port) throw new Error("--redis: HOST:PORT required");
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`case timed out after ${timeoutSeconds} s`)), timeoutSeconds * 1000);
  });
  try {
    await queue.waitUntilReady();
    await Promise.race([cases[caseName](), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

let failed = false;
try {
  await main();
} catch (err) {
  result.error = String(err?.message ?? err);
  failed = true;
}
const stop = result.stop;
delete result.stop;
console.log(JSON.stringify(result));
await Promise.race([Promise.all([stop?.(), queue.close()]), new Promise((r) => setTimeout(r, 10000))]);
process.exit(failed ? 1 : 0);
