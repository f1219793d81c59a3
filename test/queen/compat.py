"""Queen's own Python client (queen-mq) against a Spool server.

Run by scripts/queen-compat, which starts `spool server --queen-compat` and
installs queen-mq from the Python package index into a virtual environment.
Everything here goes through the queen package only. It pushes to three
partitions, consumes with two consumer groups (one with the client's
consume loop, which nacks a message until it dies into the dead letters, one
with pops and acks of its own, one of them sent to the dead letters at once),
pops one partition alone, runs transactions (one that commits, one whose
lease is stale and must change nothing), extends a lease, seeks a group back
and checks what each group received. It exits non-zero on the first check
that fails.
"""

import asyncio
import datetime
import json
import os
import sys
import uuid

from queen import Queen

URL = os.environ["SPOOL_URL"]
TOKEN = os.environ.get("SPOOL_TOKEN")
PARTITIONS = ["cust-a", "cust-b", "cust-c"]
PER_PARTITION = 10
POISON = ("cust-b", 3)


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", file=sys.stderr)
        sys.exit(1)
    print(f"ok: {what}")


def key(msg):
    return (msg["data"]["p"], msg["data"]["n"])


def in_order(received):
    """Each partition's messages in push order (a redelivery repeats one)."""
    last = {}
    for p, n in received:
        if n < last.get(p, -1):
            return False
        last[p] = n
    return True


async def drain(q, queue, group, *, partition=None, ack_status=None, max_rounds=200):
    """Pops a group until nothing is left, acking each message. As Queen's
    client does, it leaves the later messages of a partition in a pop after
    one it did not ack as completed: the nack sent them back."""
    got = []
    for _ in range(max_rounds):
        builder = q.queue(queue).group(group).batch(10).wait(True).timeout_millis(300)
        if partition:
            builder = builder.partition(partition)
        msgs = await builder.pop()
        if not msgs:
            return got
        nacked = set()
        for m in msgs:
            if m["partitionId"] in nacked:
                continue
            got.append(key(m))
            status = ack_status(m) if ack_status else True
            ctx = {"group": group}
            if status == "dlq":
                ctx["error"] = "rejected by audit"
            res = await q.ack(m, status, ctx)
            check(res.get("success") is True, f"{group}: ack of {key(m)} accepted")
            if status is not True:
                nacked.add(m["partitionId"])
    raise AssertionError(f"{group}: still getting messages after {max_rounds} pops")


async def refused_without_token():
    """With auth on, a client without a token is refused and stores nothing."""
    async with Queen(URL, retry_attempts=1) as q:
        try:
            await q.queue("no-token").push([{"data": {"n": 1}}])
            check(False, "a push without a token is refused")
        except Exception as error:
            status = getattr(getattr(error, "response", None), "status_code", None)
            check(status == 401, f"a push without a token is refused with 401 ({error})")


async def main():
    if TOKEN:
        await refused_without_token()
    async with Queen(URL, bearer_token=TOKEN) as q:
        run = uuid.uuid4().hex[:8]
        queue = f"orders-{run}"
        outbox = f"outbox-{run}"
        started = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=5)

        res = await q.queue(queue).config({"lease_time": 30, "retry_limit": 1}).create()
        check(res.get("configured") is True, "queue configured")

        for p in PARTITIONS:
            res = await q.queue(queue).partition(p).push(
                [{"data": {"p": p, "n": n}, "transactionId": f"{p}-{n}"} for n in range(PER_PARTITION)]
            )
            check([r["status"] for r in res] == ["queued"] * PER_PARTITION, f"push to {p} queued")
        res = await q.queue(queue).partition("cust-a").push([{"data": {"p": "cust-a", "n": 0}, "transactionId": "cust-a-0"}])
        check(res[0]["status"] == "duplicate", "a transactionId pushed again to its partition is a duplicate")
        everything = {(p, n) for p in PARTITIONS for n in range(PER_PARTITION)}

        # Group "billing": the client's consume loop; the poison message
        # fails every time and, with retry_limit 1, dies after 2 deliveries.
        billing = []

        async def handle(msg):
            billing.append(key(msg))
            if key(msg) == POISON:
                raise RuntimeError("cannot bill this one")

        await (
            q.queue(queue).group("billing").batch(10).each()
            .wait(True).timeout_millis(300).idle_millis(2000).concurrency(2)
            .consume(handle)
        )
        check(set(billing) == everything, "billing received every message")
        check(billing.count(POISON) == 2, "billing got the poison message twice (1 retry), then it died")
        check(len(billing) == len(everything) + 1, "billing got nothing else twice")
        check(in_order(billing), "billing received each partition in push order, through the retry")

        # Group "audit": pops and acks of its own; one message straight to
        # the dead letters.
        audit = await drain(q, queue, "audit", ack_status=lambda m: "dlq" if key(m) == ("cust-c", 7) else True)
        check(set(audit) == everything and len(audit) == len(everything), "audit received every message once")
        check(in_order(audit), "audit received each partition in push order")

        dlq = await q.queue(queue).dlq("billing").limit(10).get()
        check([key(m) for m in dlq["messages"]] == [POISON], "billing's dead letters hold the poison message")
        check(dlq["messages"][0]["errorMessage"] == "cannot bill this one", "with the handler's error")
        dlq = await q.queue(queue).dlq("audit").limit(10).get()
        check([key(m) for m in dlq["messages"]] == [("cust-c", 7)], "audit's dead letters hold the message it rejected")

        # A third group pops one partition alone.
        only_c = await drain(q, queue, "partition-c", partition="cust-c")
        check(only_c == [("cust-c", n) for n in range(PER_PARTITION)], "a partition's pop gets that partition, in order")

        groups = await q.admin.list_consumer_groups()
        mine = {g["name"]: g for g in groups if g["queueName"] == queue}
        check(set(mine) == {"billing", "audit", "partition-c"}, "the consumer groups are listed")
        check(mine["billing"]["totalLag"] == 0 and mine["audit"]["totalLag"] == 0, "billing and audit have no lag left")
        check(mine["partition-c"]["totalLag"] == 2 * PER_PARTITION, "the partition's group still has the other partitions to do")

        # Seek audit back to the start: it gets every message again.
        res = await q.admin.seek_consumer_group("audit", queue, {"timestamp": started.isoformat()})
        check(res.get("success") is True, "audit sought back")
        again = await drain(q, queue, "audit")
        check(set(again) == everything and len(again) == len(everything), "after the seek, audit received every message again")

        # Queue mode (no group): a transaction acks a message and pushes
        # its follow-up atomically; the same ack again (a stale lease)
        # changes nothing, its push included.
        msgs = await q.queue(queue).batch(1).wait(True).timeout_millis(1000).pop()
        check(len(msgs) == 1, "queue mode pops a message")
        msg = msgs[0]
        renewed = await q.renew(msg)
        check(renewed["success"] is True, "the lease is extended")
        res = await (
            q.transaction().ack(msg)
            .queue(outbox).partition("mail").push([{"data": {"after": msg["data"]}, "transactionId": "follow-up-1"}])
            .commit()
        )
        check(res.get("success") is True, "the transaction committed")
        try:
            await (
                q.transaction().ack(msg)
                .queue(outbox).partition("mail").push([{"data": {"stale": True}, "transactionId": "follow-up-2"}])
                .commit()
            )
            check(False, "a transaction with a stale lease is refused")
        except Exception as error:  # the client raises the refusal
            check("lease" in str(error).lower(), f"a transaction with a stale lease is refused ({error})")
        out = await q.queue(outbox).batch(10).wait(True).timeout_millis(1000).pop()
        check([m["data"] for m in out] == [{"after": msg["data"]}], "the outbox holds the committed push only")
        res = await q.ack(out[0], True)
        check(res.get("success") is True, "the outbox message is acked")

        print(json.dumps({"billing": len(billing), "audit": len(audit), "audit_after_seek": len(again),
                          "partition_c": len(only_c)}))


if __name__ == "__main__":
    asyncio.run(main())
