"""Drains a queue of no-op jobs with the Python SDK's Worker (one process,
asyncio) and prints the rate, for scripts/bench-sdks."""

import asyncio
import sys
import time

from spool import AsyncClient, JobContext, Worker


async def main(queue: str, jobs: int, concurrency: int) -> None:
    client = AsyncClient()
    worker = Worker(client, [queue], concurrency=concurrency, name="bench-python", wait_ms=1000, grace=5)

    @worker.handle("noop")
    async def noop(job: JobContext):
        return None

    start = time.monotonic()
    run = asyncio.create_task(worker.run(handle_signals=False))
    while True:
        q = await client.queue(queue)
        if q.counts.get("completed", 0) >= jobs:
            break
        await asyncio.sleep(0.05)
    elapsed = time.monotonic() - start
    worker.stop()
    await run
    print(f"python {jobs} {elapsed:.3f} {jobs / elapsed:.0f}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
