"""Runs the welcome jobs of the queue emails: the Python worker of the
README's tour. SPOOL_SERVER names the server (default http://127.0.0.1:7311)."""
import os

from spool import AsyncClient, JobContext, NoRetry, Worker

url = os.environ.get("SPOOL_SERVER", "http://127.0.0.1:7311")
worker = Worker(AsyncClient(url), ["emails"], concurrency=10)


@worker.handle("welcome")
async def welcome(job: JobContext):
    if "user" not in job.payload:
        raise NoRetry("no user")
    print(f"welcoming user {job.payload['user']} (attempt {job.attempt})", flush=True)
    return {"sent": True}


worker.run_sync()  # until SIGTERM/SIGINT, then finishes or hands back its jobs
