"""The Python side of the cross-language test (scripts/test-sdks-together).

`python py_side.py worker`: runs a Python worker on queue sdk-py until
SIGTERM; each job of kind `add` answers {"sum": a + b, "by": "python"}.
`python py_side.py produce N`: enqueues N jobs of kind `add` into queue
sdk-ts (run by the TypeScript worker), waits for each, and exits non-zero
unless every result is the TypeScript worker's right sum.
"""

import sys

from spool import AsyncClient, Client, JobContext, Worker


def work() -> None:
    worker = Worker(AsyncClient(), ["sdk-py"], concurrency=8, name="python-worker", wait_ms=1000, grace=5)

    @worker.handle("add")
    async def add(job: JobContext):
        return {"sum": job.payload["a"] + job.payload["b"], "by": "python"}

    worker.run_sync()


def produce(n: int) -> None:
    with Client() as spool:
        ids = [spool.enqueue("add", {"a": i, "b": 1000}, queue="sdk-ts").id for i in range(n)]
        for i, job_id in enumerate(ids):
            job = spool.await_job(job_id, timeout=30)
            want = {"sum": i + 1000, "by": "typescript"}
            if job.state != "completed" or job.result != want:
                print(f"FAIL: job {job_id}: {job.state} {job.result}, want completed {want}", file=sys.stderr)
                sys.exit(1)
    print(f"ok: {n} jobs enqueued from Python were run by the TypeScript worker")


if __name__ == "__main__":
    if sys.argv[1] == "worker":
        work()
    else:
        produce(int(sys.argv[2]))
