"""A worker process doing real, resumable work: a SHA-256 hash chain, one checkpoint per step.

Run by the tests (this directory's SIGTERM test, and test/server/python-client.test.ts, which
kills it with SIGKILL mid-task): it prints one JSON line per thing that happened, so the test
knows when it is mid-task, which lease it held and where it resumed from.

    python3 chain_worker.py URL WORKER_ID [--task-type T] [--lease-seconds N] [--heartbeat S] [--step-delay S] [--wait-ms N] [--max-tasks N]
"""

import argparse
import hashlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from taskpool_client import Client, Worker  # noqa: E402


def say(**fields):
    print(json.dumps(fields), flush=True)


def step(digest: str, index: int) -> str:
    """One link of the chain: 1000 rounds of SHA-256 over the previous digest and the step number."""
    value = f"{digest}:{index}".encode()
    for _ in range(1000):
        value = hashlib.sha256(value).digest()
    return value.hex()


def hash_chain(ctx, step_delay):
    rounds = ctx.params["rounds"]
    start, digest = (ctx.checkpoint["step"], ctx.checkpoint["digest"]) if ctx.checkpoint else (0, ctx.params["seed"])
    say(event="started", task_id=ctx.id, lease_token=ctx.lease_token, attempt=ctx.attempt, resumed_from=start)
    for index in range(start, rounds):
        if ctx.cancelled:
            say(event="stopping", task_id=ctx.id, at=index, lost=ctx.lost)
            ctx.check()
        digest = step(digest, index)
        ctx.save_checkpoint({"step": index + 1, "digest": digest})
        ctx.progress((index + 1) / rounds)
        say(event="checkpoint", task_id=ctx.id, step=index + 1)
        time.sleep(step_delay)
    say(event="finished", task_id=ctx.id, digest=digest, lost=ctx.lost)
    return {"digest": digest, "resumed_from": start}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("worker_id")
    parser.add_argument("--api-key")
    parser.add_argument("--lease-seconds", type=int, default=30)
    parser.add_argument("--heartbeat", type=float, default=0.2)
    parser.add_argument("--step-delay", type=float, default=0.05)
    parser.add_argument("--wait-ms", type=int, default=5000)
    parser.add_argument("--max-tasks", type=int)
    parser.add_argument("--task-type", default="hash_chain")
    args = parser.parse_args()
    client = Client(args.url, args.api_key, retries=2, backoff=0.05)
    worker = Worker(
        client,
        {args.task_type: lambda ctx: hash_chain(ctx, args.step_delay)},
        worker_id=args.worker_id,
        wait_ms=args.wait_ms,
        lease_seconds=args.lease_seconds,
        heartbeat_interval=args.heartbeat,
    )
    say(event="ready", worker_id=args.worker_id, pid=os.getpid())
    worker.run(max_tasks=args.max_tasks)
    say(event="exited", processed=worker.tasks_processed)


if __name__ == "__main__":
    main()
