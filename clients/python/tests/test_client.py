"""The client and worker against a real taskpool server: TASKPOOL_URL (and TASKPOOL_API_KEY if it asks for keys).

test/server/python-client.test.ts starts the server (SQLite and PostgreSQL) and runs
`python3 -m unittest discover -s clients/python/tests` with TASKPOOL_URL set.
"""

import datetime
import email.utils
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
import unittest
import uuid
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import taskpool_client  # noqa: E402
from taskpool_client import Client, LeaseLost, PermanentError, TaskContext, TaskpoolError, Worker  # noqa: E402

URL = os.environ.get("TASKPOOL_URL", "")
API_KEY = os.environ.get("TASKPOOL_API_KEY") or None
HERE = os.path.dirname(os.path.abspath(__file__))


def setUpModule():
    if not URL:
        raise RuntimeError("TASKPOOL_URL is not set: run these tests through test/server/python-client.test.ts, or against a server you started")


def unique(prefix):
    """A task type of this test only: tests share one server and must not claim each other's tasks."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def wait_for(condition, timeout=5.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class ScriptedServer:
    """A local HTTP endpoint answering a fixed list of (status, body), or None: read the request and hang up
    without answering (an answer lost after the server acted). The only way to make a server fail on cue."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.requests = 0
        #: The Idempotency-Key header of each request (None when absent).
        self.keys = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                outer.requests += 1
                outer.keys.append(self.headers.get("Idempotency-Key"))
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                answer = outer.answers.pop(0)
                if answer is None:
                    self.close_connection = True
                    return
                status, body = answer
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST

            def log_message(self, *args):
                pass

        # On 127.0.0.2, not 127.0.0.1: a port the kernel hands out here may have served a taskpool server
        # that has closed since, whose clients, still retrying, then take this script's answers (a run saw
        # 40 such requests in one test, from a worker a timed-out suite left running). They call
        # 127.0.0.1, so they cannot reach this socket.
        self.httpd = http.server.HTTPServer(("127.0.0.2", 0), Handler)
        self.url = f"http://127.0.0.2:{self.httpd.server_address[1]}"
        # close() waits for the serving loop to look at its shutdown flag, which it does every poll_interval
        # (0.5 s by default: half a second per scripted server, seconds per run of the suite).
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.client = Client(URL, API_KEY, retries=2, backoff=0.01)

    def test_enqueue_get_and_the_envelope(self):
        kind = unique("resize")
        task = self.client.enqueue(kind, {"image": "a.png"}, priority=5)
        self.assertEqual(task["task_type"], kind)
        self.assertEqual(task["params"], {"image": "a.png"})
        self.assertEqual(task["status"], "pending")
        self.assertEqual(task["priority"], 5)
        shown = self.client.get(task["id"])
        self.assertNotIn("success", shown)
        self.assertEqual(shown["task"]["id"], task["id"])
        self.assertEqual([e["event"] for e in shown["events"]], ["created"])

        # A unique key of this run: keys are unique across task types, and the server may be one an earlier run used.
        key = unique("k1")
        results = self.client.enqueue_batch([{"task_type": kind, "params": {"n": 1}}, {"task_type": kind, "unique_key": key}])
        self.assertEqual([r["created"] for r in results], [True, True])
        again = self.client.enqueue(kind, unique_key=key)
        self.assertEqual(again["id"], results[1]["task"]["id"])

    def test_an_idempotency_key_creates_once_and_refuses_another_request(self):
        kind = unique("receipt")
        key = unique("order-7")
        first = self.client.enqueue(kind, {"order": 7}, idempotency_key=key)
        lease = self.client.claim("py-w3", [kind])
        self.assertEqual(lease["id"], first["id"])
        again = self.client.enqueue(kind, {"order": 7}, idempotency_key=key)
        self.assertEqual((again["id"], again["status"]), (first["id"], "claimed"))
        replayed = self.client.request("POST", "/api/tasks", {"task_type": kind, "params": {"order": 7}}, headers={"Idempotency-Key": key})
        self.assertEqual((replayed["created"], replayed["replayed"]), (False, True))
        with self.assertRaises(TaskpoolError) as reused:
            self.client.enqueue(kind, {"order": 8}, idempotency_key=key)
        self.assertEqual((reused.exception.status, reused.exception.code), (422, "idempotency_key_reused"))
        batch = [{"task_type": kind, "params": {"n": 1}}, {"task_type": kind, "params": {"n": 2}}]
        made = self.client.enqueue_batch(batch, idempotency_key=key + "-batch")
        repeated = self.client.enqueue_batch(batch, idempotency_key=key + "-batch")
        self.assertEqual([r["task"]["id"] for r in repeated], [r["task"]["id"] for r in made])
        self.assertEqual([r["created"] for r in repeated], [False, False])
        with self.assertRaises(TaskpoolError) as bad:
            self.client.enqueue(kind, idempotency_key="has space")
        self.assertEqual((bad.exception.status, bad.exception.code), (400, "validation_error"))
        self.assertIn("idempotency-key", bad.exception.message)

    def test_errors_carry_status_code_and_message(self):
        with self.assertRaises(TaskpoolError) as bad:
            self.client.enqueue("9 not a type")
        self.assertEqual((bad.exception.status, bad.exception.code), (400, "validation_error"))
        self.assertIn("task_type", bad.exception.message)
        self.assertEqual(bad.exception.body["issues"][0]["path"], "task_type")
        with self.assertRaises(TaskpoolError) as missing:
            self.client.get(2**40)
        self.assertEqual((missing.exception.status, missing.exception.code), (404, "not_found"))
        self.assertEqual(missing.exception.message, f"Task {2**40} does not exist")
        with self.assertRaises(TaskpoolError) as unknown:
            self.client.request("POST", "/api/tasks", {"task_type": "x", "colour": "red"})
        self.assertEqual(unknown.exception.status, 400)
        self.assertIn("colour", unknown.exception.message)

    def test_bad_input_is_refused_not_rounded_or_replaced(self):
        # int() read 2.9 as task 2 and True as task 1: cancel(3.5) cancelled task 3.
        for bad in (2.9, True, 0, "3"):
            with self.assertRaises(ValueError):
                self.client.get(bad)
        with self.assertRaises(ValueError):
            self.client.cancel(3.5)
        # [] was sent as {}: a task the server refuses when sent as it is.
        with self.assertRaises(TaskpoolError) as listed:
            self.client.enqueue(unique("listed"), [])
        self.assertEqual((listed.exception.status, listed.exception.code), (400, "validation_error"))
        # claim() with limit leased them all and answered the first: the rest sat leased to nobody.
        with self.assertRaises(ValueError):
            self.client.claim("py-w", ["x"], limit=3)
        # wait_ms=0 claimed in a tight loop on an idle queue.
        with self.assertRaises(ValueError):
            Worker(self.client, {"x": lambda ctx: None}, wait_ms=0)

    def test_claim_many_gives_each_task_its_own_lease(self):
        kind = unique("many")
        for i in range(3):
            self.client.enqueue(kind, {"i": i})
        tasks = self.client.claim_many("py-many", [kind], limit=5)
        self.assertEqual(sorted(t["params"]["i"] for t in tasks), [0, 1, 2])
        for task in tasks:
            self.assertEqual(self.client.complete(task["id"], "py-many", task["lease_token"])["task"]["status"], "completed")
        self.assertEqual(self.client.claim_many("py-many", [kind], limit=5), [])

    def test_a_retry_after_given_as_a_date_is_the_wait_until_then(self):
        # RFC 9110 allows a date; float() of one raised ValueError out of every call, the heartbeat thread's included.
        soon = email.utils.format_datetime(datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=30), usegmt=True)
        self.assertTrue(25 <= taskpool_client._error(503, b"", {"Retry-After": soon}).retry_after <= 30)
        self.assertEqual(taskpool_client._error(503, b"", {"Retry-After": "Wed, 21 Oct 2099 07:28:00 GMT"}).retry_after, taskpool_client._MAX_RETRY_AFTER)
        self.assertIsNone(taskpool_client._error(503, b"", {"Retry-After": "soon"}).retry_after)
        self.assertEqual(taskpool_client._error(429, b"", {"Retry-After": "7"}).retry_after, 7.0)

    def test_the_lease_protocol_and_a_stale_lease(self):
        kind = unique("crawl")
        created = self.client.enqueue(kind, {"url": "https://example.com"})
        self.assertIsNone(self.client.claim("py-w1", [unique("none")]))
        task = self.client.claim("py-w1", [kind])
        self.assertEqual(task["id"], created["id"])
        token = task["lease_token"]
        self.assertEqual(self.client.start(task["id"], "py-w1", token)["status"], "running")
        self.assertEqual(self.client.heartbeat(task["id"], "py-w1", token, progress=0.1)["progress"], 0.1)
        self.assertEqual(self.client.checkpoint(task["id"], "py-w1", token, {"page": 2})["checkpoint"], {"page": 2})
        self.assertEqual(self.client.progress(task["id"], "py-w1", token, 0.5)["progress"], 0.5)
        beat = self.client.worker_heartbeat("py-w1", [kind], current_load=1, leases=[{"task_id": task["id"], "lease_token": token}])
        self.assertEqual((beat["message"], beat["lost"]), ("Heartbeat recorded", []))
        # Given back and claimed by another worker: the first worker's token is stale from then on.
        self.assertEqual(self.client.release(task["id"], "py-w1", token, reason="test")["checkpoint"], {"page": 2})
        again = self.client.claim("py-w2", [kind])
        self.assertEqual(again["checkpoint"], {"page": 2})
        with self.assertRaises(LeaseLost) as stale:
            self.client.complete(task["id"], "py-w1", token, {"pages": 4})
        self.assertEqual((stale.exception.status, stale.exception.code), (409, "lease_lost"))
        self.assertIn("no longer leased to this worker", stale.exception.message)
        beat = self.client.worker_heartbeat("py-w1", [kind], leases=[{"task_id": task["id"], "lease_token": token}])
        self.assertEqual(beat["lost"], [task["id"]])
        done = self.client.complete(again["id"], "py-w2", again["lease_token"], {"pages": 3})
        self.assertEqual((done["task"]["status"], done["task"]["result"], done["follow_ups"]), ("completed", {"pages": 3}, []))

    def test_a_long_poll_claim_answers_when_work_arrives(self):
        kind = unique("later")
        threading.Timer(0.3, lambda: self.client.enqueue(kind)).start()
        started = time.monotonic()
        task = self.client.claim("py-w2", [kind], wait_ms=10_000)
        self.assertIsNotNone(task)
        self.assertLess(time.monotonic() - started, 5)
        started = time.monotonic()
        self.assertIsNone(self.client.claim("py-w2", [kind], wait_ms=300))
        self.assertGreaterEqual(time.monotonic() - started, 0.29)

    def test_5xx_and_network_errors_are_retried_4xx_never_and_a_claim_only_if_unsent(self):
        flaky = ScriptedServer([(503, {"success": False, "error": "not_ready", "message": "down"}), (502, {}), (201, {"success": True, "task": {"id": 7}})])
        try:
            self.assertEqual(Client(flaky.url, retries=3, backoff=0.01).enqueue("x"), {"id": 7})
            self.assertEqual(flaky.requests, 3)
        finally:
            flaky.close()
        refusing = ScriptedServer([(409, {"success": False, "error": "lease_lost", "message": "gone"}), (201, {"success": True})])
        try:
            with self.assertRaises(LeaseLost):
                Client(refusing.url, retries=3, backoff=0.01).complete(1, "w", "t")
            self.assertEqual(refusing.requests, 1)
        finally:
            refusing.close()
        # A create is retried longer than the client's `retries` (a server being restarted, say):
        # its Idempotency-Key makes every attempt safe.
        restarting = ScriptedServer([(503, {"success": False, "error": "database_unavailable", "message": "starting"})] * 6 + [(201, {"success": True, "task": {"id": 9}})])
        try:
            self.assertEqual(Client(restarting.url, retries=2, backoff=0.001).enqueue("x"), {"id": 9})
            self.assertEqual(restarting.requests, 7)
        finally:
            restarting.close()
        boom = (500, {"success": False, "error": "internal_error", "message": "boom"})
        down = ScriptedServer([boom] * 3)
        try:
            with self.assertRaises(TaskpoolError) as failed:
                Client(down.url, retries=2, backoff=0.01).get(1)
            self.assertEqual((failed.exception.status, failed.exception.code, down.requests), (500, "internal_error", 3))
        finally:
            down.close()
        # A 500 or a hang-up may come after the task was written: an enqueue is sent again with the
        # same Idempotency-Key (the server answers the first write's task), the call's own or one
        # made for it; a claim is not sent again (it would lease a task nobody works on).
        created = (201, {"success": True, "task": {"id": 8}})
        for answer in (boom, None):
            again = ScriptedServer([answer, created])
            try:
                self.assertEqual(Client(again.url, retries=3, backoff=0.01).enqueue("x"), {"id": 8})
                self.assertEqual(again.requests, 2)
                self.assertRegex(again.keys[0], r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$")
                self.assertEqual(again.keys[1], again.keys[0])
            finally:
                again.close()
        batch = ScriptedServer([None, (201, {"success": True, "results": [{"task": {"id": 10}, "created": True}]}), created])
        try:
            client = Client(batch.url, retries=3, backoff=0.01)
            self.assertEqual(client.enqueue_batch([{"task_type": "x"}], idempotency_key="import-7")[0]["task"], {"id": 10})
            self.assertEqual(batch.keys, ["import-7", "import-7"])
            client.enqueue("x")
            self.assertNotIn(batch.keys[2], ("import-7", None))
        finally:
            batch.close()
        claim = ScriptedServer([None, (200, {"success": True, "task": {"id": 9}})])
        try:
            with self.assertRaises(TaskpoolError):
                Client(claim.url, retries=3, backoff=0.01).claim("w", ["x"])
            self.assertEqual(claim.requests, 1)
        finally:
            claim.close()
        closed = ScriptedServer([])
        closed.close()
        with self.assertRaises(TaskpoolError) as unreachable:
            Client(closed.url, retries=1, backoff=0.001).get(1)
        self.assertEqual((unreachable.exception.status, unreachable.exception.code), (None, "network_error"))
        self.assertIn("after 2 attempts", unreachable.exception.message)
        with self.assertRaises(TaskpoolError) as unreachable_create:
            Client(closed.url, retries=1, backoff=0.001).enqueue("x")
        self.assertIn("after 8 attempts", unreachable_create.exception.message)

    def test_retry_for_bounds_every_call_by_time_enqueues_included(self):
        unavailable = (503, {"success": False, "error": "database_unavailable", "message": "down"})
        # 0 fails at once, an enqueue too (retried at least 7 times otherwise): an interactive tool.
        down = ScriptedServer([unavailable] * 8 + [(201, {"success": True, "task": {"id": 1}})])
        try:
            with self.assertRaises(TaskpoolError) as failed:
                Client(down.url, retry_for=0).enqueue("x")
            self.assertEqual((failed.exception.status, down.requests), (503, 1))
        finally:
            down.close()
        # Longer than `retries` would: retried for the time given, and given up once it is spent.
        down = ScriptedServer([unavailable] * 200)
        try:
            started = time.monotonic()
            with self.assertRaises(TaskpoolError):
                Client(down.url, retries=0, backoff=0.05, max_backoff=0.1, retry_for=1.0).get(1)
            self.assertGreaterEqual(time.monotonic() - started, 1.0)
            self.assertLess(time.monotonic() - started, 1.5)
            self.assertGreater(down.requests, 5)
        finally:
            down.close()
        for bad in (-1, float("nan"), float("inf"), 86_401, "60", True):
            with self.assertRaisesRegex(ValueError, r"^retry_for must be seconds from 0 \(no retries\) to 86400"):
                Client("http://127.0.0.1:1", retry_for=bad)

    def test_a_base_url_without_its_scheme_is_refused_at_once(self):
        # It was sent: urllib's "unknown url type" was taken for a network error and retried for over 10 s.
        for bad in ("127.0.0.1:8080", "localhost:8080", "ftp://127.0.0.1:8080", "http://", "", None):
            started = time.monotonic()
            with self.assertRaisesRegex(ValueError, r"^base_url must be the taskpool server's address with its scheme, e\.g\. http://127\.0\.0\.1:8080; got "):
                Client(bad).enqueue("x")
            self.assertLess(time.monotonic() - started, 1.0)
        self.assertEqual(Client("https://tasks.example.com/").base_url, "https://tasks.example.com")


class WorkerTest(unittest.TestCase):
    def setUp(self):
        self.client = Client(URL, API_KEY, retries=2, backoff=0.01)

    def worker(self, handlers, **options):
        options.setdefault("wait_ms", 300)
        options.setdefault("heartbeat_interval", 0.05)
        return Worker(self.client, handlers, worker_id=f"py-{uuid.uuid4().hex[:8]}", **options)

    def test_a_refused_outcome_ends_that_task_not_the_worker(self):
        kind = unique("cancelled")
        first = self.client.enqueue(kind, {"n": 1})
        second = self.client.enqueue(kind, {"n": 2})

        def handler(ctx):
            if ctx.task["params"]["n"] == 1:
                # Cancelled by an operator after the last heartbeat: the completion is refused (409 invalid_transition).
                self.client.cancel(ctx.id, reason="not needed")
            return {"n": ctx.task["params"]["n"]}

        worker = self.worker({kind: handler}, heartbeat_interval=60)
        with self.assertLogs("taskpool_client", level="WARNING") as logs:
            worker.run(max_tasks=2, handle_signals=False)
        self.assertEqual(self.client.get(first["id"])["task"]["status"], "cancelled")
        self.assertEqual(self.client.get(second["id"])["task"]["status"], "completed")
        self.assertTrue(any(f"the outcome of task {first['id']} was not recorded: 409 invalid_transition" in line for line in logs.output), logs.output)

    def test_an_outcome_whose_answer_was_lost_is_taken_as_written(self):
        task = {"id": 5, "lease_token": "tok", "params": {}}
        # As a server answers a read: without the task's lease_token, which only a lease's holder is told.
        completed = {"success": True, "task": {"id": 5, "status": "completed", "worker_id": "w"}}
        refused = (409, {"success": False, "error": "invalid_transition", "message": "Cannot complete task 5: it is completed"})
        # The completion is applied but the connection drops (None); the retry is refused; the task shows it done by this lease.
        server = ScriptedServer([None, refused, (200, completed)])
        try:
            client = Client(server.url, retries=3, backoff=0.01)
            worker = Worker(client, {"x": lambda ctx: None}, worker_id="w")
            ctx = TaskContext(client, "w", task, threading.Event())
            with self.assertLogs("taskpool_client", level="INFO") as logs:
                self.assertIsNone(worker._report(ctx, lambda: client.complete(5, "w", "tok", {"ok": True}), "completed"))
            self.assertEqual(server.requests, 3)
            self.assertEqual([line.split(":")[0] for line in logs.output], ["INFO"])  # the finding; the retry is at debug
            self.assertIn("task 5 was completed by an earlier try whose answer was lost", logs.output[-1])
        finally:
            server.close()

    def test_an_outcome_and_a_checkpoint_ride_out_an_outage(self):
        task = {"id": 5, "lease_token": "tok", "params": {}}
        down = (503, {"success": False, "error": "database_unavailable", "message": "The database cannot be reached"})
        broken = (500, {"success": False, "error": "internal_error", "message": "Internal server error"})
        completed = {"success": True, "task": {"id": 5, "status": "completed"}, "follow_ups": []}
        # Each call is one request (retries=0): the worker, not the client, waits the outage out.
        server = ScriptedServer([down, (200, {"success": True, "task": {"id": 5}}), down, broken, (200, completed)])
        try:
            client = Client(server.url, retries=0)
            worker = Worker(client, {"x": lambda ctx: None}, worker_id="w")
            ctx = TaskContext(client, "w", task, threading.Event())
            with mock.patch.object(taskpool_client, "_OUTAGE_PAUSE", 0.001), self.assertLogs("taskpool_client", level="INFO") as logs:
                ctx.save_checkpoint({"page": 2})
                answer = worker._report(ctx, lambda: client.complete(5, "w", "tok", {"ok": True}), "completed")
            self.assertEqual(answer, {"task": {"id": 5, "status": "completed"}, "follow_ups": []})
            self.assertEqual(ctx.checkpoint, {"page": 2})
            self.assertEqual(server.requests, 5)
            # Ridden out: each try again said at info, no warning.
            self.assertEqual([r.levelname for r in logs.records], ["INFO"] * 3, logs.output)
            self.assertIn("could not report the outcome of task 5 (500 internal_error", logs.output[-1])
        finally:
            server.close()

    def test_a_heartbeat_interval_as_long_as_dead_after_is_warned_of(self):
        # A coordinator at its defaults declared such a worker dead between beats, again and again.
        client = Client("http://127.0.0.1:1")
        with self.assertLogs("taskpool_client", level="WARNING") as logs:
            Worker(client, {"x": lambda ctx: None}, heartbeat_interval=120)
        self.assertEqual(len(logs.records), 1)
        self.assertIn("heartbeat_interval=120: a coordinator at its default dead_after (120 s) declares this worker dead between its beats", logs.output[0])
        with mock.patch.object(taskpool_client.log, "warning") as warning:  # assertNoLogs is Python 3.10's
            Worker(client, {"x": lambda ctx: None}, heartbeat_interval=30)
            Worker(client, {"x": lambda ctx: None})
        warning.assert_not_called()

    def test_an_outcome_and_a_checkpoint_refused_by_the_rate_limit_are_sent_again_when_it_says(self):
        # A 429 was taken as final: over its key's 100 requests a minute, a worker dropped each outcome.
        task = {"id": 5, "lease_token": "tok", "params": {}}
        limited = (429, {"success": False, "error": "rate_limited", "message": "Rate limit exceeded", "retry_after": 0.2})
        completed = {"success": True, "task": {"id": 5, "status": "completed"}, "follow_ups": []}
        server = ScriptedServer([limited, (200, {"success": True, "task": {"id": 5}}), limited, (200, completed)])
        try:
            client = Client(server.url, retries=0)
            worker = Worker(client, {"x": lambda ctx: None}, worker_id="w")
            ctx = TaskContext(client, "w", task, threading.Event())
            started = time.monotonic()
            with mock.patch.object(taskpool_client, "_OUTAGE_PAUSE", 0.001), self.assertLogs("taskpool_client", level="INFO") as logs:
                ctx.save_checkpoint({"page": 2})
                answer = worker._report(ctx, lambda: client.complete(5, "w", "tok", {"ok": True}), "completed")
            self.assertEqual(answer, {"task": {"id": 5, "status": "completed"}, "follow_ups": []})
            self.assertEqual(server.requests, 4)
            self.assertGreaterEqual(time.monotonic() - started, 0.4)  # retry_after waited, each time
            self.assertEqual([r.levelname for r in logs.records], ["INFO"] * 2, logs.output)
            self.assertIn("could not report the outcome of task 5 (429 rate_limited", logs.output[-1])
        finally:
            server.close()

    def test_a_lease_lost_during_a_rate_limit_wait_ends_the_wait(self):
        # The handler sat out the whole retry_after (up to a minute) only to be refused.
        task = {"id": 5, "lease_token": "tok", "params": {}}
        limited = (429, {"success": False, "error": "rate_limited", "message": "Rate limit exceeded", "retry_after": 30})
        server = ScriptedServer([limited])
        try:
            ctx = TaskContext(Client(server.url, retries=0), "w", task, threading.Event())
            threading.Timer(0.3, ctx._mark_lost).start()
            started = time.monotonic()
            with self.assertLogs("taskpool_client", level="INFO"), self.assertRaises(LeaseLost) as raised:
                ctx.save_checkpoint({"page": 2})
            self.assertLess(time.monotonic() - started, 5)
            self.assertIn("the lease was lost while waiting to try again", str(raised.exception))
            self.assertEqual(server.requests, 1)
            self.assertTrue(ctx.lost)
        finally:
            server.close()

    def test_retries_are_logged_at_debug_and_only_a_final_failure_warns(self):
        down = (503, {"success": False, "error": "database_unavailable", "message": "The database cannot be reached", "retry_after": 0.01})
        found = (200, {"success": True, "task": {"id": 5, "status": "pending"}, "events": []})
        # A read retried through a server restart: two 503s, then the answer.
        server = ScriptedServer([down, down, found, down, down, down])
        try:
            client = Client(server.url, retries=2, backoff=0.001)
            with self.assertLogs("taskpool_client", level="DEBUG") as logs:
                self.assertEqual(client.get(5)["task"]["status"], "pending")
            self.assertEqual([r.levelname for r in logs.records], ["DEBUG", "DEBUG"], logs.output)
            # The worker's claims failing through an outage: one warning, then debug, then one line when they work again.
            worker = Worker(Client(server.url, retries=0), {"x": lambda ctx: None}, worker_id="w")
            server.answers = [down, down, down, (404, {"success": False, "error": "no_tasks", "message": "No pending tasks available"})]
            with self.assertLogs("taskpool_client", level="DEBUG") as logs:
                for _ in range(4):
                    self.assertIsNone(worker._claim())
            self.assertEqual([r.levelname for r in logs.records], ["WARNING", "DEBUG", "DEBUG", "INFO"], logs.output)
            self.assertIn("worker w: claims succeed again", logs.output[-1])
        finally:
            server.close()

    def test_failing_heartbeats_warn_once_and_say_how_long_they_failed_when_they_get_through(self):
        down = (503, {"success": False, "error": "database_unavailable", "message": "The database cannot be reached"})
        beat = (200, {"success": True, "message": "Heartbeat recorded", "next_heartbeat_in": 30, "lost": []})
        server = ScriptedServer([down] * 4 + [beat, beat])
        try:
            worker = Worker(Client(server.url, retries=0), {"x": lambda ctx: None}, worker_id="w")
            with self.assertLogs("taskpool_client", level="DEBUG") as logs:
                for _ in range(6):
                    worker._beat()
            self.assertEqual(server.requests, 6)
            self.assertEqual([r.levelname for r in logs.records], ["WARNING", "DEBUG", "DEBUG", "DEBUG", "INFO"], logs.output)
            self.assertIn("worker w: heartbeat failed: 503 database_unavailable", logs.output[0])
            self.assertRegex(logs.output[-1], r"worker w: heartbeats get through again, after failing for \d+ s$")
        finally:
            server.close()

    def test_a_refused_outcome_is_not_tried_again(self):
        task = {"id": 5, "lease_token": "tok", "params": {}}
        refused = (409, {"success": False, "error": "invalid_transition", "message": "Cannot complete task 5: it is cancelled"})
        server = ScriptedServer([refused, (200, {"success": True, "task": {"id": 5, "status": "cancelled"}, "events": []})])
        try:
            client = Client(server.url, retries=0)
            worker = Worker(client, {"x": lambda ctx: None}, worker_id="w")
            ctx = TaskContext(client, "w", task, threading.Event())
            with mock.patch.object(taskpool_client, "_OUTAGE_PAUSE", 0.001), self.assertLogs("taskpool_client", level="WARNING") as logs:
                self.assertIsNone(worker._report(ctx, lambda: client.complete(5, "w", "tok", {"ok": True}), "completed"))
            self.assertEqual(server.requests, 2)  # the refusal, then the look at the task; no second try
            self.assertIn("the outcome of task 5 was not recorded: 409 invalid_transition", logs.output[-1])
        finally:
            server.close()

    def test_runs_handlers_completes_and_fails(self):
        ok, bad, fatal = unique("ok"), unique("bad"), unique("fatal")
        a = self.client.enqueue(ok, {"n": 20})
        b = self.client.enqueue(bad, max_attempts=3)
        c = self.client.enqueue(fatal, max_attempts=3)

        def count(ctx):
            total = 0
            for i in range(ctx.params["n"]):
                total += i
                if i % 5 == 4:
                    ctx.save_checkpoint({"i": i, "total": total})
                    ctx.progress((i + 1) / ctx.params["n"])
            return {"total": total}

        def broken(ctx):
            raise ValueError("the input is broken")

        def doomed(ctx):
            raise PermanentError("never works")

        worker = self.worker({ok: count, bad: broken, fatal: doomed})
        worker.run(max_tasks=3, handle_signals=False)
        self.assertEqual(worker.tasks_processed, 3)

        shown = self.client.get(a["id"])
        self.assertEqual((shown["task"]["status"], shown["task"]["result"]), ("completed", {"total": 190}))
        self.assertEqual(shown["task"]["checkpoint"], {"i": 19, "total": 190})
        self.assertEqual([e["event"] for e in shown["events"]].count("checkpoint"), 4)
        # Claimed and started in one request: one 'claimed' event that says so, no 'started' of its own.
        claimed = [e for e in shown["events"] if e["event"] in ("claimed", "started")]
        self.assertEqual([(e["event"], e["data"]) for e in claimed], [("claimed", {"attempt": 1, "started": True})])
        failed_once = self.client.get(b["id"])
        self.assertEqual((failed_once["task"]["status"], failed_once["task"]["attempts"], failed_once["task"]["error_message"]), ("pending", 1, "ValueError: the input is broken"))
        # The traceback goes with the failure, into its event: the file and line the handler raised at.
        stack = failed_once["events"][-1]["data"]["stack"]
        self.assertRegex(stack, r'^Traceback \(most recent call last\):\n[\s\S]*File ".*test_client\.py", line \d+, in broken\n\s+raise ValueError\("the input is broken"\)\nValueError: the input is broken\n$')
        failed = self.client.get(c["id"])["task"]
        self.assertEqual((failed["status"], failed["attempts"]), ("failed", 1))
        # Deregistered on the way out.
        workers = {w["worker_id"]: w for w in self.client.request("GET", "/api/workers")["workers"]}
        self.assertEqual(workers[worker.worker_id]["status"], "inactive")
        self.assertEqual(workers[worker.worker_id]["tasks_processed"], 3)

    def test_a_task_whose_claim_answer_was_lost_goes_back_at_a_beat_and_runs(self):
        kind = unique("lost_claim")
        task_id = self.client.enqueue(kind, {})["id"]
        worker = self.worker({kind: lambda ctx: {"ran": True}}, lease_seconds=2)
        send = worker.client.request
        lost = []

        def losing_the_first_claim(method, path, body=None, **options):
            answer = send(method, path, body, **options)
            if path.endswith("/claim") and not lost and answer.get("task"):
                lost.append(answer["task"]["id"])
                raise TaskpoolError(None, "server_unreachable", "the answer was lost (simulated)")
            return answer

        worker.client.request = losing_the_first_claim
        worker.run(max_tasks=1, handle_signals=False)
        self.assertEqual(lost, [task_id])
        shown = self.client.get(task_id)
        self.assertEqual((shown["task"]["status"], shown["task"]["attempts"]), ("completed", 2))
        self.assertEqual([e["event"] for e in shown["events"]], ["created", "claimed", "requeued", "claimed", "completed"])

    def test_a_worker_held_up_past_its_lease_after_its_claim_runs_nothing_that_was_handed_on(self):
        kind = unique("thawed")
        task_id = self.client.enqueue(kind)["id"]
        ran = []
        worker = self.worker({kind: lambda ctx: ran.append(ctx.id)}, lease_seconds=2)
        claim, beat = worker._claim, worker._beat
        other = f"py-other-{kind}"

        def held_up_after_the_answer():
            claimed = claim()
            if claimed is not None:
                # Frozen (SIGSTOP) between the claim's answer and the handler, heartbeats too, past the lease:
                # meanwhile the coordinator takes the task back and another worker claims it.
                worker._beat = lambda: None
                time.sleep(2.3)
                self.client.recover_stale()
                taken = self.client.claim(other, [kind], start=True)
                self.assertEqual(taken["id"], claimed["id"])
                worker._beat = beat
                worker.stop()
            return claimed

        worker._claim = held_up_after_the_answer
        worker.run(handle_signals=False)
        self.assertEqual(ran, [])
        shown = self.client.get(task_id)["task"]
        self.assertEqual((shown["status"], shown["worker_id"]), ("running", other))

    def test_a_worker_held_up_briefly_after_its_claim_renews_the_lease_and_runs_the_task(self):
        kind = unique("held_up")
        task_id = self.client.enqueue(kind)["id"]
        worker = self.worker({kind: lambda ctx: {"ran": True}}, lease_seconds=4)
        claim, beat, lease_holds = worker._claim, worker._beat, worker._lease_holds

        def held_up_after_the_answer():
            claimed = claim()
            if claimed is not None:
                # Frozen, heartbeats too, past half the lease but not past it: nobody took the task meanwhile.
                worker._beat = lambda: None
                time.sleep(2.2)
            return claimed

        def beats_thaw_with_the_task_current(ctx, asked_at):
            # The beats thaw once the task is the worker's current one, so they list it (the other order is the test below).
            worker._beat = beat
            return lease_holds(ctx, asked_at)

        worker._claim = held_up_after_the_answer
        worker._lease_holds = beats_thaw_with_the_task_current
        worker.run(max_tasks=1, handle_signals=False)
        self.assertEqual(self.client.get(task_id)["task"]["status"], "completed")

    def test_a_beat_that_left_out_a_task_held_up_past_half_its_lease_lands_before_its_renewal_and_the_task_runs_only_again(self):
        kind = unique("thawed_beat")
        first = self.client.enqueue(kind)
        ran_under = []

        def handler(ctx):
            ran_under.append(ctx.lease_token)
            worker.stop()
            return {"ran": True}

        worker = self.worker({kind: handler}, lease_seconds=4)
        claim, beat, send_beat = worker._claim, worker._beat, worker.client.worker_heartbeat
        on_its_way = threading.Event()
        claimed_first = []

        def slow_to_land(*args, **kwargs):
            # Read before the task was the worker's (it lists none and says it lists them all), landing late.
            on_its_way.set()
            time.sleep(0.5)
            return send_beat(*args, **kwargs)

        def held_up_after_the_answer():
            claimed = claim()
            if claimed is not None and not claimed_first:
                claimed_first.append(claimed)
                # Frozen past half the lease (the server's clock may lag this one's: 3.5 s for its 2), beats too.
                worker._beat = lambda: None
                time.sleep(3.5)
                worker._beat = beat
                worker.client.worker_heartbeat = slow_to_land
                threading.Thread(target=beat, daemon=True).start()
                on_its_way.wait(5)
                worker.client.worker_heartbeat = send_beat
            return claimed

        worker._claim = held_up_after_the_answer
        worker.run(handle_signals=False)
        # That beat gave the task back: the worker did not run it under the lease it renewed too late, claimed it again and ran it.
        self.assertEqual(claimed_first[0]["id"], first["id"])
        self.assertNotIn(claimed_first[0]["lease_token"], ran_under)
        self.assertEqual(len(ran_under), 1)
        self.assertEqual(self.client.get(first["id"])["task"]["status"], "completed")

    def test_a_handler_cut_off_from_the_server_for_the_lease_s_length_is_told_it_lost_the_lease(self):
        kind = unique("partitioned")
        task_id = self.client.enqueue(kind)["id"]
        seen = {}

        def long_task(ctx):
            started = time.monotonic()
            # The partition: every beat fails from now on, as the network to the server is cut.
            worker.client.worker_heartbeat = mock.Mock(side_effect=TaskpoolError(None, "network_error", "unreachable (simulated)"))
            wait_for(lambda: ctx.lost, timeout=6.0, what="the lease to be given up")
            seen["after"] = time.monotonic() - started
            seen["cancelled"] = ctx.cancelled
            worker.client.worker_heartbeat = beat
            worker.stop()
            return {"should": "not be reported"}

        worker = self.worker({kind: long_task}, lease_seconds=2)
        beat = worker.client.worker_heartbeat
        worker.run(handle_signals=False)
        # The lease's 2 s after the last beat that got through (sent at most an interval, 0.05 s, before the cut).
        self.assertGreater(seen["after"], 1.5)
        self.assertLess(seen["after"], 2.5)
        self.assertTrue(seen["cancelled"])
        self.assertNotEqual(self.client.get(task_id)["task"]["status"], "completed")

    def test_a_redirect_is_refused_and_the_api_key_goes_nowhere_else(self):
        received = []

        class Elsewhere(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                received.append((self.command, self.path, self.headers.get("X-API-Key")))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"success": true, "task": {}}')

            do_POST = do_GET

            def log_message(self, *args):
                pass

        other = http.server.HTTPServer(("127.0.0.2", 0), Elsewhere)
        target = f"http://127.0.0.2:{other.server_address[1]}/steal"

        class Redirecting(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(302)
                self.send_header("Location", target + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_POST = do_GET

            def log_message(self, *args):
                pass

        proxy = http.server.HTTPServer(("127.0.0.2", 0), Redirecting)
        for server in (other, proxy):
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
        try:
            client = Client(f"http://127.0.0.2:{proxy.server_address[1]}", "tp_SECRET", retries=0)
            for call in (lambda: client.get(1), lambda: client.enqueue("x", {})):
                with self.assertRaises(TaskpoolError) as caught:
                    call()
                self.assertEqual((caught.exception.status, caught.exception.code), (302, "redirected"))
                self.assertIn(f"to {target}", str(caught.exception))
            self.assertEqual(received, [])
        finally:
            for server in (other, proxy):
                server.shutdown()
                server.server_close()

    def test_follow_ups_are_created_with_the_completion_and_output_the_server_refuses_fails_the_task(self):
        parent, child = unique("parent"), unique("child")
        made = self.client.enqueue(parent, {"n": 1})["id"]
        unsendable = self.client.enqueue(parent, {"n": 2})["id"]
        refused = self.client.enqueue(parent, {"n": 3})["id"]

        def handler(ctx):
            if ctx.params["n"] == 1:
                ctx.enqueue(child, {"from": ctx.id}, priority=5)
                return {"ok": True}
            if ctx.params["n"] == 2:
                return {"tags": {"a"}}  # a set: json.dumps raised TypeError out of the worker loop
            ctx.enqueue("9 not a type")
            return None

        self.worker({parent: handler}).run(max_tasks=3, handle_signals=False)
        children = self.client.request("GET", f"/api/tasks?task_type={child}")["tasks"]
        self.assertEqual([(c["params"], c["priority"], c["parent_id"]) for c in children], [({"from": made}, 5, made)])
        self.assertEqual(self.client.get(made)["task"]["status"], "completed")
        for task_id, reason in ((unsendable, "not JSON"), (refused, "task_type")):
            task = self.client.get(task_id)["task"]
            self.assertEqual((task["status"], task["attempts"]), ("failed", 1))
            self.assertTrue(task["error_message"].startswith("Handler output rejected, task not completed: "), task["error_message"])
            self.assertIn(reason, task["error_message"])

    def test_the_heartbeat_thread_outlives_a_beat_that_raises(self):
        worker = self.worker({unique("beats"): lambda ctx: None})
        beats = []

        def beat():
            beats.append(time.monotonic())
            if len(beats) == 2:
                raise ValueError("not a TaskpoolError")

        worker._beat = beat
        worker._next_beat = 0.02
        thread = threading.Thread(target=worker._beat_loop, daemon=True)
        with self.assertLogs("taskpool_client", level="ERROR") as logs:
            thread.start()
            # Raised out of the second beat, it ended the thread: the worker never beat again and was declared dead.
            wait_for(lambda: len(beats) >= 4, what="beats after the one that raised")
        worker._beats_stop.set()
        thread.join()
        self.assertIn("heartbeat failed unexpectedly", logs.output[0])

    def test_a_stopping_worker_beats_as_full_so_no_dead_workers_task_is_reserved_for_it(self):
        worker = self.worker({unique("idle"): lambda ctx: None})
        load = lambda: next(w for w in self.client.request("GET", "/api/workers")["workers"] if w["worker_id"] == worker.worker_id)["current_load"]
        worker._beat()
        self.assertEqual(load(), 0)
        worker.stop()
        worker._beat()
        self.assertEqual(load(), 1)

    def test_a_late_beat_of_a_run_that_shut_down_leaves_the_worker_inactive_and_another_run_is_a_restart(self):
        worker = self.worker({unique("gone"): lambda ctx: None})
        worker.run(max_tasks=0, handle_signals=False)
        status = lambda: next(w for w in self.client.request("GET", "/api/workers")["workers"] if w["worker_id"] == worker.worker_id)["status"]
        self.assertEqual(status(), "inactive")
        # A beat of the run that shut down, landing after the shutdown (held up on the way, or sent again).
        worker._beat()
        self.assertEqual(status(), "inactive")
        # The same id started again is another run: registered.
        again = Worker(self.client, worker.handlers, worker_id=worker.worker_id, heartbeat_interval=0.05)
        again._beat()
        self.assertEqual(status(), "active")

    def test_a_late_shutdown_of_a_run_replaced_since_leaves_the_new_run_and_its_task_be(self):
        kind = unique("replaced")
        task_id = self.client.enqueue(kind, {})["id"]
        # The old run has a client of its own, whose shutdown is held up until the new run has registered and claimed.
        old_client = Client(URL, API_KEY, retries=2, backoff=0.01)
        old = Worker(old_client, {kind: lambda ctx: None}, worker_id=f"py-{uuid.uuid4().hex[:8]}", wait_ms=300, heartbeat_interval=0.05)
        new = Worker(self.client, old.handlers, worker_id=old.worker_id, heartbeat_interval=0.05)
        send = old_client.request
        claimed = []
        answers = []

        def held_until_a_restart(method, path, body=None, **options):
            if not path.endswith("/shutdown"):
                return send(method, path, body, **options)
            new._beat()
            claimed.append(self.client.claim(new.worker_id, [kind], start=True))
            answers.append(send(method, path, body, **options))
            return answers[-1]

        old_client.request = held_until_a_restart
        old.run(max_tasks=0, handle_signals=False)
        self.assertEqual([t["id"] for t in claimed], [task_id])
        self.assertEqual([a["released"] for a in answers], [[]])
        registered = next(w for w in self.client.request("GET", "/api/workers")["workers"] if w["worker_id"] == old.worker_id)
        self.assertEqual((registered["status"], registered["active_tasks"]), ("active", 1))
        # The new run's lease holds: its outcome is taken, the task ran once.
        self.client.complete(task_id, new.worker_id, claimed[0]["lease_token"], {"ok": True})
        shown = self.client.get(task_id)
        self.assertEqual((shown["task"]["status"], shown["task"]["attempts"]), ("completed", 1))
        self.assertEqual([e["event"] for e in shown["events"]], ["created", "claimed", "completed"])
        # An operator's shutdown names no run: it is of the current one.
        self.assertEqual(self.client.shutdown_worker(new.worker_id), [])
        self.assertEqual(next(w for w in self.client.request("GET", "/api/workers")["workers"] if w["worker_id"] == old.worker_id)["status"], "inactive")

    def test_a_busy_worker_gets_its_next_task_in_the_answer_to_its_completion(self):
        kind = unique("chained")
        ids = [self.client.enqueue(kind, {"n": n}, priority=10 - n)["id"] for n in range(4)]
        worker = self.worker({kind: lambda ctx: {"n": ctx.params["n"]}})
        requests = []
        send = worker.client.request

        def counting(method, path, body=None, **options):
            requests.append(path.rsplit("/", 1)[-1])
            return send(method, path, body, **options)

        worker.client.request = counting
        worker.run(max_tasks=3, handle_signals=False)
        # One claim, then each completion brings the next task, but the last, which asks for none.
        self.assertEqual([r for r in requests if r in ("claim", "complete")], ["claim", "complete", "complete", "complete"])
        for task_id, n in zip(ids[:3], range(3)):
            shown = self.client.get(task_id)
            self.assertEqual((shown["task"]["status"], shown["task"]["result"]), ("completed", {"n": n}))
            claimed = [(e["event"], e["data"]) for e in shown["events"] if e["event"] in ("claimed", "started")]
            self.assertEqual(claimed, [("claimed", {"attempt": 1, "started": True})])
        self.assertEqual(self.client.get(ids[3])["task"]["status"], "pending")

    def test_past_its_timeout_a_task_is_no_longer_renewed_and_check_fails_the_attempt(self):
        kind = unique("hung")
        task = self.client.enqueue(kind, timeout_seconds=1, max_attempts=1)
        # It goes on a little past its timeout before it checks, as a handler between two checks would.
        worker = self.worker({kind: lambda ctx: (wait_for(lambda: ctx.timed_out, what="the timeout"), time.sleep(0.3), ctx.check())})
        beats = []
        send = worker.client.worker_heartbeat

        def recording(*args, **options):
            beats.append(options)
            return send(*args, **options)

        worker.client.worker_heartbeat = recording
        worker.run(max_tasks=1, handle_signals=False)
        shown = self.client.get(task["id"])["task"]
        self.assertEqual((shown["status"], shown["error_message"]), ("failed", "TimedOut: Timed out after 1 s"))
        # Its heartbeats listed the lease until the timeout, then no more, without saying they listed them all.
        kinds = [(b["leases"] is not None, b["all_leases"]) for b in beats]
        self.assertIn((True, True), kinds)
        self.assertIn((False, False), kinds)
        self.assertLess(kinds.index((True, True)), kinds.index((False, False)))

    def test_a_lost_lease_stops_the_handler_and_its_result_is_never_reported(self):
        kind = unique("long")
        task = self.client.enqueue(kind)
        seen = {}

        def long_task(ctx):
            ctx.save_checkpoint({"phase": "begun"})
            wait_for(lambda: ctx.lost, what="the heartbeat to report the lease lost")
            seen["lost"], seen["cancelled"] = ctx.lost, ctx.cancelled
            return {"should": "not be reported"}

        def cancel_when_running():
            wait_for(lambda: self.client.get(task["id"])["task"]["checkpoint"] is not None, what="the task to run")
            self.client.cancel(task["id"], reason="test")

        canceller = threading.Thread(target=cancel_when_running)
        canceller.start()
        self.worker({kind: long_task}).run(max_tasks=1, handle_signals=False)
        canceller.join()
        self.assertEqual(seen, {"lost": True, "cancelled": True})
        shown = self.client.get(task["id"])["task"]
        self.assertEqual((shown["status"], shown["result"]), ("cancelled", None))

    def test_a_checkpoint_saved_by_an_earlier_attempt_is_where_the_next_one_starts(self):
        kind = unique("resume")
        task = self.client.enqueue(kind)
        first = self.client.claim("py-first", [kind])
        self.client.checkpoint(first["id"], "py-first", first["lease_token"], {"done": 3})
        self.client.release(first["id"], "py-first", first["lease_token"], reason="test")
        seen = []
        self.worker({kind: lambda ctx: seen.append((ctx.checkpoint, ctx.attempt))}).run(max_tasks=1, handle_signals=False)
        self.assertEqual(seen, [({"done": 3}, 1)])
        self.assertEqual(self.client.get(task["id"])["task"]["status"], "completed")

    def test_sigterm_mid_task_gives_the_task_back_with_its_checkpoint(self):
        rounds, kind = 200, unique("chain")
        task = self.client.enqueue(kind, {"rounds": rounds, "seed": uuid.uuid4().hex})
        worker_id = f"py-term-{uuid.uuid4().hex[:6]}"
        process = chain_worker(worker_id, "--task-type", kind)
        try:
            lines = read_until(process, lambda e: e.get("event") == "checkpoint" and e.get("step", 0) >= 2 and e["task_id"] == task["id"])
            self.assertTrue(any(e.get("event") == "started" and e["task_id"] == task["id"] for e in lines))
            process.send_signal(signal.SIGTERM)
            out, _ = process.communicate(timeout=10)
        finally:
            process.kill()
        events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        self.assertEqual(process.returncode, 0)
        self.assertEqual([e["event"] for e in events][-2:], ["stopping", "exited"])
        shown = self.client.get(task["id"])
        self.assertEqual(shown["task"]["status"], "pending")
        self.assertGreaterEqual(shown["task"]["checkpoint"]["step"], 2)
        self.assertLess(shown["task"]["checkpoint"]["step"], rounds)
        self.assertEqual(shown["events"][-1]["event"], "released")
        workers = {w["worker_id"]: w for w in self.client.request("GET", "/api/workers")["workers"]}
        self.assertEqual(workers[worker_id]["status"], "inactive")

    def test_sigterm_while_waiting_for_work_exits_at_once(self):
        worker_id = f"py-idle-{uuid.uuid4().hex[:6]}"
        process = chain_worker(worker_id, "--wait-ms", "20000", "--task-type", unique("idle"))
        try:
            read_until(process, lambda e: e.get("event") == "ready")
            wait_for(lambda: any(w["worker_id"] == worker_id for w in self.client.request("GET", "/api/workers")["workers"]), what="the worker to register")
            time.sleep(0.2)
            started = time.monotonic()
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=10)
            self.assertLess(time.monotonic() - started, 3)
        finally:
            process.kill()
        self.assertEqual(process.returncode, 0)
        workers = {w["worker_id"]: w for w in self.client.request("GET", "/api/workers")["workers"]}
        self.assertEqual(workers[worker_id]["status"], "inactive")


def chain_worker(worker_id, *extra):
    args = [sys.executable, os.path.join(HERE, "chain_worker.py"), URL, worker_id, "--heartbeat", "0.1", *extra]
    if API_KEY:
        args += ["--api-key", API_KEY]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def read_until(process, predicate, timeout=10.0):
    """The JSON lines a worker process printed, up to the first that matches."""
    deadline = time.monotonic() + timeout
    lines = []
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            raise AssertionError(f"the worker exited early: {lines}")
        event = json.loads(line)
        lines.append(event)
        if predicate(event):
            return lines
    raise AssertionError(f"timed out; the worker printed {lines}")


if __name__ == "__main__":
    unittest.main()
