"""A client for taskpool's HTTP API: producer calls and a worker loop, standard library only (Python 3.9+).

    client = Client("http://127.0.0.1:8080", api_key="tp_...")
    client.enqueue("resize", {"image": "a.png"})
    Worker(client, {"resize": resize}).run()

The worker claims with a long poll (``wait_ms``), so an idle worker costs one request per wait; a
busy one asks for its next task in the request that completes the last (``claim_next``), so a task
costs one request, not two;
while a handler runs, a background thread sends the worker heartbeat that also renews the task's
lease, and learns there when the lease was taken back (``ctx.lost``): the handler should then stop,
and its result is never reported, since another worker may already run the task. On SIGTERM or
SIGINT the worker stops claiming, tells the running handler (``ctx.cancelled``), gives back what it
still holds (checkpoints kept, no attempt charged) and deregisters.

Retries, with exponential backoff and jitter, as the TypeScript client does: 4xx answers never
(the request itself is wrong, or the lease is gone). A call that is safe to repeat (reads, lease
writes, which the server applies once and refuses after, enqueues, which carry an
``Idempotency-Key``) is retried after a network error or a 5xx answer. One that is not (a claim)
is retried only when it certainly never reached the server, a refused connection or a
502/503/504, since a lost answer may have followed a write: repeating it would lease a task nobody
works on until its lease runs out. How long: ``retries`` times (enqueues at least 7, through a
server's restart), or for ``retry_for`` seconds, every call alike (``Client``).

Every enqueue sends an ``Idempotency-Key`` header: the caller's ``idempotency_key``, or a UUID made
for the call. The server creates the call's tasks once and answers a repeat of it with them
(``replayed``), so a create whose answer was lost (a reset connection, a server killed mid-request)
is sent again, the same key with it, instead of failing or being doubled. Give your own key to
repeat a call across restarts of your program (an order id and a purpose, say); the server
remembers keys for 24 hours and refuses (422 ``idempotency_key_reused``) a key sent with a
different request.
"""

from __future__ import annotations

import datetime
import email.utils
import http.client
import json
import logging
import os
import random
import signal
import socket
import threading
import time
import traceback
import uuid
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Dict, Iterable, List, Optional

__all__ = ["Cancelled", "Client", "LeaseLost", "PermanentError", "TaskContext", "TaskpoolError", "Worker"]

__version__ = "0.1.0"

log = logging.getLogger("taskpool_client")

_NETWORK_ERRORS = (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError, socket.timeout)
# Answers that come before any work was done: a proxy with no server behind it, or a server not ready.
_UNSENT_STATUSES = (502, 503, 504)


#: How many times a worker tries a lease write (an outcome, a checkpoint) while the server or its
#: database is out of reach, pausing _OUTAGE_PAUSE * 2**n seconds (at most 10) between tries: about
#: a minute in all, as the TypeScript worker. Given up sooner, an outage of a few seconds cost a
#: finished task its outcome, and the task ran again once its lease expired.
_OUTAGE_TRIES = 8
_OUTAGE_PAUSE = 0.2

#: Seconds of silence after which a coordinator at its defaults calls a worker dead and takes its tasks back.
_DEFAULT_DEAD_AFTER = 120

#: A claim's lease when its answer does not say (the server's default).
_DEFAULT_LEASE_SECONDS = 120


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Redirects are refused, not followed: urllib sends every header on to whatever host a Location
    names, the API key with them (a proxy or a maintenance page redirecting elsewhere was handed the
    fleet's key), and turns a POST into a GET, which lost an enqueue without a word."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


def _through_outage(call: Callable[[], Any], lost: Callable[[], bool], what: str) -> Any:
    """``call()``, tried again while the answer is a network error, a 5xx or a 429 (not a refusal) and the lease is not known lost."""
    for attempt in range(1, _OUTAGE_TRIES + 1):
        try:
            return call()
        except TaskpoolError as e:
            # A 429 wrote nothing, and says when the key may call again: taken as final, a worker over its
            # key's limit dropped each finished task's outcome, and the task ran again once its lease expired.
            rate_limited = e.status == 429
            unavailable = e.status is None or e.status >= 500 or rate_limited
            if not unavailable or attempt >= _OUTAGE_TRIES or lost():
                raise
            pause = min(10.0, _OUTAGE_PAUSE * 2**attempt)
            if rate_limited:
                pause = max(pause, e.retry_after or 1.0)
            # Info, not warning: a server restart passes within a few tries; the last failure is raised, and the worker warns of it.
            log.info("could not %s (%s); trying again in %.1f s", what, e, pause)
            # A lease lost meanwhile (the heartbeat says so) ends the wait: a 429's retry_after can be a
            # minute, and the handler waited it out only to be refused.
            if _wait_unless(lost, pause):
                raise LeaseLost(409, "lease_lost", f"could not {what}: the lease was lost while waiting to try again") from e
    raise AssertionError("unreachable")


def _wait_unless(done: Callable[[], bool], seconds: float) -> bool:
    """Waits ``seconds``, or less if ``done()`` turns true (looked at every 50 ms); returns ``done()``."""
    deadline = time.monotonic() + seconds
    while not done():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(0.05, left))
    return True


def _unsent(error: BaseException) -> bool:
    """Whether a network error certainly came before the request reached the server: no connection was made."""
    return isinstance(error, urllib.error.URLError) and isinstance(error.reason, (ConnectionRefusedError, socket.gaierror))


class TaskpoolError(Exception):
    """An answer that is not a success: ``status`` (None for a network failure), ``code`` (the envelope's ``error``) and ``message``."""

    def __init__(self, status: Optional[int], code: str, message: str, body: Optional[Dict[str, Any]] = None, retry_after: Optional[float] = None):
        super().__init__(f"{code}: {message}" if status is None else f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.body = body or {}
        self.retry_after = retry_after


class LeaseLost(TaskpoolError):
    """409 lease_lost: the task was taken back (or cancelled); stop working on it, its result will not be accepted."""


class Cancelled(Exception):
    """Raised by ``TaskContext.check()`` when the worker is shutting down: the task is given back, checkpoint kept."""


class TimedOut(Exception):
    """Raised by ``TaskContext.check()`` past the task's ``timeout_seconds``: the attempt fails, and is retried as any failure."""


class PermanentError(Exception):
    """Raise from a handler to fail the task at once, whatever attempts remain."""


class Client:
    """The HTTP API: JSON in and out, the envelope unwrapped, errors raised as TaskpoolError.

    ``retry_for``: seconds a call that failed for want of the server (a network error, a 5xx) is sent
    again, from its first attempt, enqueues included; 0 fails at once. None (the default): ``retries``
    retries, enqueues at least _CREATE_RETRIES.
    """

    def __init__(
        self,
        base_url: str,
        api_key: Optional[str] = None,
        *,
        timeout: float = 30.0,
        retries: int = 4,
        backoff: float = 0.2,
        max_backoff: float = 5.0,
        retry_for: Optional[float] = None,
    ):
        if retry_for is not None and (isinstance(retry_for, bool) or not isinstance(retry_for, (int, float)) or not 0 <= retry_for <= _MAX_RETRY_FOR):
            raise ValueError(f"retry_for must be seconds from 0 (no retries) to {_MAX_RETRY_FOR} (a day), or None for the default retries; got {retry_for!r}")
        # urllib refuses a URL without its scheme only as the request goes out, and that refusal looked
        # like a network error: retried for 10 s or more, then "unknown url type: 127.0.0.1".
        parsed = urllib.parse.urlsplit(base_url) if isinstance(base_url, str) else None
        if parsed is None or parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"base_url must be the taskpool server's address with its scheme, e.g. http://127.0.0.1:8080; got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.retry_for = retry_for

    # -- transport --------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: Optional[Dict[str, Any]] = None,
        *,
        timeout: Optional[float] = None,
        repeatable: bool = True,
        headers: Optional[Dict[str, str]] = None,
        min_retries: int = 0,
    ) -> Dict[str, Any]:
        """One API call; returns the success envelope's fields (``success`` removed).

        ``repeatable=False`` for a call that must not run twice: it is then retried only when it
        certainly never reached the server (see the module's notes on retries). ``headers`` are sent
        with every attempt. ``min_retries`` raises the client's ``retries`` for this call (not a ``retry_for``).
        """
        started = time.monotonic()
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Accept": "application/json", "User-Agent": f"taskpool-python/{__version__}", **(headers or {})}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["X-API-Key"] = self.api_key
        attempt = 0
        while True:
            attempt += 1
            try:
                req = urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers)
                with _OPENER.open(req, timeout=timeout or self.timeout) as response:
                    return _success(response.read())
            except urllib.error.HTTPError as e:
                if 300 <= e.code < 400:
                    where = e.headers.get("Location") if e.headers is not None else None
                    raise TaskpoolError(
                        e.code,
                        "redirected",
                        f"{method} {self.base_url}{path} was redirected ({e.code}) to {where or 'another address'}: redirects are not followed, "
                        "since they would carry the API key (and a POST's body) elsewhere; give the client the server's own address",
                    ) from None
                error = _error(e.code, e.read(), e.headers)
                # 4xx: the request is wrong or the lease is gone; asking again changes nothing.
                pause = self._pause(attempt, started, min_retries) if e.code >= 500 and (repeatable or e.code in _UNSENT_STATUSES) else None
                if pause is None:
                    raise error from None
                # Debug: a retry that succeeds is no news; the last failure is raised to the caller.
                log.debug("taskpool %s %s answered %s; retrying", method, path, e.code)
            except _NETWORK_ERRORS as e:
                if not (repeatable or _unsent(e)):
                    raise TaskpoolError(None, "network_error", f"{method} {self.base_url}{path} failed ({e}); not retried, since it may have reached the server and must not run twice") from e
                pause = self._pause(attempt, started, min_retries)
                if pause is None:
                    raise TaskpoolError(None, "network_error", f"{method} {self.base_url}{path} failed after {attempt} attempts: {e}") from e
                log.debug("taskpool %s %s failed (%s); retrying", method, path, e)
            time.sleep(pause)

    def _pause(self, attempt: int, started: float, min_retries: int) -> Optional[float]:
        """Seconds to wait before retrying a call begun at ``started`` (time.monotonic()) after its attempt ``attempt``; None: give up."""
        pause = min(self.max_backoff, self.backoff * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
        if self.retry_for is None:
            return pause if attempt <= max(self.retries, min_retries) else None
        # A pause that would end past the time allowed is cut short: the last attempt goes out as it ends.
        left = started + self.retry_for - time.monotonic()
        return min(pause, left) if left > 0 else None

    # -- producer ---------------------------------------------------------------------------

    def enqueue(self, task_type: str, params: Optional[Dict[str, Any]] = None, *, idempotency_key: Optional[str] = None, **options: Any) -> Dict[str, Any]:
        """Creates a task (options: priority, unique_key, scheduled_for or delay_seconds, max_attempts, concurrency_key, …); returns it.

        delay_seconds counts from the database's clock; a scheduled_for computed from this host's clock carries its skew.
        idempotency_key: see the module's notes; one is made for the call when none is given.
        """
        # Only None means none: [] or "" sent as {} made a task the server would have refused.
        body = {"task_type": task_type, "params": {} if params is None else params, **options}
        return self.request("POST", "/api/tasks", body, headers=_idempotency(idempotency_key), min_retries=_CREATE_RETRIES)["task"]

    def enqueue_batch(self, tasks: Iterable[Dict[str, Any]], *, idempotency_key: Optional[str] = None) -> List[Dict[str, Any]]:
        """Creates several tasks at once, all or none; returns ``[{"task": …, "created": bool}]``.

        One idempotency key covers the whole batch (see the module's notes).
        """
        body = {"tasks": list(tasks)}
        return self.request("POST", "/api/tasks/batch", body, headers=_idempotency(idempotency_key), min_retries=_CREATE_RETRIES)["results"]

    def get(self, task_id: int) -> Dict[str, Any]:
        """A task and its event timeline: ``{"task": …, "events": […]}``."""
        return self.request("GET", f"/api/tasks/{_task_id(task_id)}")

    def cancel(self, task_id: int, reason: Optional[str] = None) -> Dict[str, Any]:
        """Cancels a task (admin key); a worker running it hears so at its next beat (the lease is reported lost), and its calls for the task are refused (409 invalid_transition)."""
        return self.request("POST", f"/api/tasks/{_task_id(task_id)}/cancel", _without_none({"reason": reason}))["task"]

    def recover_stale(self) -> Dict[str, Any]:
        """Runs one coordinator sweep now (admin key): what it requeued, failed, reassigned."""
        return self.request("POST", "/api/tasks/recover-stale")

    # -- worker protocol --------------------------------------------------------------------

    def claim(self, worker_id: str, task_types: Optional[List[str]] = None, *, wait_ms: int = 0, lease_seconds: Optional[int] = None, **filters: Any) -> Optional[Dict[str, Any]]:
        """The next ready task (with its ``lease_token``), waiting up to ``wait_ms`` for one; None when there is none.

        One task: ``claim_many`` takes several.
        """
        if "limit" in filters:
            # Passed through, the server leased them all and this answered the first: the rest sat leased to nobody.
            raise ValueError("claim() returns one task; use claim_many(worker_id, task_types, limit=…) to take several")
        body = _without_none({"worker_id": worker_id, "task_types": task_types, "wait_ms": wait_ms or None, "lease_seconds": lease_seconds, **filters})
        try:
            # The server answers by the end of the wait; the timeout covers the wait and then some.
            return self.request("POST", "/api/tasks/claim", body, timeout=self.timeout + wait_ms / 1000, repeatable=False)["task"]
        except TaskpoolError as e:
            if e.code == "no_tasks":
                return None
            raise

    def claim_many(self, worker_id: str, task_types: Optional[List[str]] = None, *, limit: int, wait_ms: int = 0, lease_seconds: Optional[int] = None, **filters: Any) -> List[Dict[str, Any]]:
        """Up to ``limit`` ready tasks, each with its own ``lease_token``, waiting up to ``wait_ms`` for the first; ``[]`` when there is none."""
        body = _without_none({"worker_id": worker_id, "task_types": task_types, "limit": limit, "wait_ms": wait_ms or None, "lease_seconds": lease_seconds, **filters})
        try:
            return self.request("POST", "/api/tasks/claim", body, timeout=self.timeout + wait_ms / 1000, repeatable=False)["tasks"]
        except TaskpoolError as e:
            if e.code == "no_tasks":
                return []
            raise

    def start(self, task_id: int, worker_id: str, lease_token: str) -> Dict[str, Any]:
        """Marks a claimed task running."""
        return self._lease_call(task_id, "start", worker_id, lease_token, {})

    def heartbeat(self, task_id: int, worker_id: str, lease_token: str, *, lease_seconds: Optional[int] = None, progress: Optional[float] = None) -> Dict[str, Any]:
        """Extends one task's lease (a worker heartbeat with ``leases`` renews them all in one call)."""
        return self._lease_call(task_id, "heartbeat", worker_id, lease_token, _without_none({"lease_seconds": lease_seconds, "progress": progress}))

    def checkpoint(self, task_id: int, worker_id: str, lease_token: str, checkpoint: Any) -> Dict[str, Any]:
        """Saves a resume point (any JSON); it survives retries, release and reassignment."""
        return self._lease_call(task_id, "checkpoint", worker_id, lease_token, {"checkpoint": checkpoint})

    def progress(self, task_id: int, worker_id: str, lease_token: str, progress: float) -> Dict[str, Any]:
        """Reports progress, 0 to 1."""
        return self._lease_call(task_id, "progress", worker_id, lease_token, {"progress": progress})

    def complete(
        self, task_id: int, worker_id: str, lease_token: str, result: Any = None, follow_ups: Optional[List[Dict[str, Any]]] = None, *, claim_next: Optional[Dict[str, Any]] = None
    ) -> Dict[str, Any]:
        """Completes a task with its result and follow-up tasks; returns ``{"task": …, "follow_ups": […]}``.

        ``claim_next`` (a claim's fields but ``worker_id``, e.g. ``{"task_types": ["resize"], "start": True}``) also claims
        this worker's next task(s) once the completion is written; they come back as ``next_tasks`` (``[]``: none ready).
        """
        fields = {"worker_id": worker_id, "lease_token": lease_token, "result": result, "follow_ups": follow_ups, "claim_next": claim_next}
        return self.request("POST", f"/api/tasks/{_task_id(task_id)}/complete", _without_none(fields))

    def fail(self, task_id: int, worker_id: str, lease_token: str, error: str, *, retryable: Optional[bool] = None, stack: Optional[str] = None) -> Dict[str, Any]:
        """Fails an attempt: retried after backoff while attempts remain, unless retryable is False. ``stack`` (a traceback) is kept in the failure's event."""
        return self._lease_call(task_id, "fail", worker_id, lease_token, _without_none({"error": error, "retryable": retryable, "stack": stack}))

    def release(self, task_id: int, worker_id: str, lease_token: str, *, reason: Optional[str] = None) -> Dict[str, Any]:
        """Gives a task back without charging an attempt; its checkpoint stays."""
        return self._lease_call(task_id, "release", worker_id, lease_token, _without_none({"reason": reason}))

    def worker_heartbeat(self, worker_id: str, roles: List[str], *, capacity: int = 1, current_load: int = 0, tasks_processed: int = 0, leases: Optional[List[Dict[str, Any]]] = None, **extra: Any) -> Dict[str, Any]:
        """Registers or refreshes the worker and renews ``leases`` (``[{"task_id", "lease_token"}]``); ``lost`` lists those it no longer holds."""
        body = {"worker_id": worker_id, "roles": roles, "capacity": capacity, "current_load": current_load, "tasks_processed": tasks_processed, **extra}
        if leases:
            body["leases"] = leases
        return self.request("POST", "/api/workers/heartbeat", body)

    def shutdown_worker(self, worker_id: str, *, run_id: Optional[str] = None) -> List[int]:
        """Deregisters a worker; what it still held goes back to the pool. Returns the released task ids.

        ``run_id`` names the run shutting down (the ``run_id`` of its beats): if another run has registered under the id
        since (this shutdown arrived late, or was sent again), nothing changes and nothing is released (``[]``).
        Without it, the shutdown is of whichever run is current.
        """
        body = None if run_id is None else {"run_id": run_id}
        return self.request("POST", f"/api/workers/{urllib.parse.quote(worker_id, safe='')}/shutdown", body)["released"]

    def _lease_call(self, task_id: int, action: str, worker_id: str, lease_token: str, fields: Dict[str, Any]) -> Dict[str, Any]:
        return self.request("POST", f"/api/tasks/{_task_id(task_id)}/{action}", {"worker_id": worker_id, "lease_token": lease_token, **fields})["task"]


class TaskContext:
    """What a handler gets: the task, its last checkpoint, and ways to save progress and to learn it should stop."""

    def __init__(self, client: Client, worker_id: str, task: Dict[str, Any], stopping: threading.Event, asked_at: Optional[float] = None, lease_seconds: Optional[float] = None):
        self.task = task
        self.id: int = task["id"]
        self.params: Dict[str, Any] = task.get("params") or {}
        #: The last checkpoint saved, by this attempt or an earlier one (None on a first run): resume from it.
        self.checkpoint: Any = task.get("checkpoint")
        self.attempt: int = task.get("attempts", 1)
        self.lease_token: str = task["lease_token"]
        self._client = client
        self._worker_id = worker_id
        self._lost = threading.Event()
        self._stopping = stopping
        #: As the TypeScript worker does: the lease is renewed until timeout_seconds after the handler starts, no longer.
        timeout = task.get("timeout_seconds")
        self._deadline: Optional[float] = None if timeout is None else time.monotonic() + timeout
        #: Tasks to create with this one's completion (ctx.enqueue), in its transaction: none if it fails.
        self.follow_ups: List[Dict[str, Any]] = []
        self._returned = False
        #: The lease's length, and when it was last renewed at the latest (time.monotonic(): the claim was
        #: asked for then, or a beat that renewed it was sent then): it ends by the sum, unless renewed again.
        self._lease_seconds = _lease_length(task, lease_seconds)
        self._renewed_at = time.monotonic() if asked_at is None else asked_at

    @property
    def lost(self) -> bool:
        """The lease was taken back (expired, re-claimed or cancelled), or no heartbeat renewed it for its
        length (a partition: the coordinator may have handed the task on): stop; the result would be refused."""
        if not self._lost.is_set() and time.monotonic() >= self._renewed_at + self._lease_seconds:
            log.warning("task %s: no heartbeat renewed its lease for its %.0f s; stop (another worker may hold it now)", self.id, self._lease_seconds)
            self._lost.set()
        return self._lost.is_set()

    @property
    def timed_out(self) -> bool:
        """The task ran past its timeout_seconds: its lease is no longer renewed, and the coordinator takes it back."""
        return self._deadline is not None and time.monotonic() >= self._deadline

    @property
    def cancelled(self) -> bool:
        """Stop soon: the lease is lost, the task timed out, or the worker is shutting down (save a checkpoint first, then return or call check())."""
        return self.lost or self.timed_out or self._stopping.is_set()

    def check(self) -> None:
        """Raises LeaseLost when the lease is gone, TimedOut past the task's timeout, Cancelled when the worker is shutting down; else returns."""
        if self.lost:
            raise LeaseLost(409, "lease_lost", f"Task {self.id} is no longer leased to this worker")
        if self.timed_out:
            raise TimedOut(f"Timed out after {self.task['timeout_seconds']} s")
        if self._stopping.is_set():
            raise Cancelled(f"worker {self._worker_id} is shutting down")

    def enqueue(self, task_type: str, params: Optional[Dict[str, Any]] = None, **options: Any) -> None:
        """A follow-up task (options as ``Client.enqueue`` takes them), created in the same transaction as this task's
        completion, and not at all if it fails; the server checks it then, and a refused one fails this task, naming it."""
        if self._returned:
            raise RuntimeError(f"task {self.id}'s handler has returned: ctx.enqueue({task_type!r}) must be called before it returns")
        self.follow_ups.append({"task_type": task_type, "params": {} if params is None else params, **options})

    def save_checkpoint(self, data: Any) -> None:
        """Saves a resume point the next attempt starts from (``ctx.checkpoint``); raises LeaseLost if the lease is gone."""
        self._call(lambda: self._client.checkpoint(self.id, self._worker_id, self.lease_token, data))
        self.checkpoint = data

    def progress(self, fraction: float) -> None:
        """Reports progress, 0 to 1; raises LeaseLost if the lease is gone."""
        self._call(lambda: self._client.progress(self.id, self._worker_id, self.lease_token, fraction))

    def _call(self, call: Callable[[], Any]) -> None:
        try:
            _through_outage(call, lambda: self.lost, f"save task {self.id}'s checkpoint or progress")
        except LeaseLost:
            self._lost.set()
            raise

    def _mark_lost(self) -> None:
        self._lost.set()

    def _renewed(self, sent_at: float) -> None:
        """A beat sent at ``sent_at`` (time.monotonic()) renewed the lease: it runs a lease's length from then at least."""
        self._renewed_at = max(self._renewed_at, sent_at)


Handler = Callable[[TaskContext], Any]


class _Interrupted(BaseException):
    """Raised by the signal handler to end a claim that is waiting for work."""


class Worker:
    """Claims tasks of its handlers' types one at a time and runs them, until stopped (SIGTERM, SIGINT, stop(), max_tasks)."""

    def __init__(
        self,
        client: Client,
        handlers: Dict[str, Handler],
        *,
        worker_id: Optional[str] = None,
        wait_ms: int = 20_000,
        lease_seconds: Optional[int] = None,
        heartbeat_interval: Optional[float] = None,
    ):
        if not handlers:
            raise ValueError("a worker needs at least one handler: {task_type: function}")
        if isinstance(wait_ms, bool) or not isinstance(wait_ms, int) or not 1 <= wait_ms <= 30_000:
            # 0 claimed in a tight loop on an idle queue (2,000 requests in 3 s), through any rate limit.
            raise ValueError(f"wait_ms is how long each claim waits for a task, from 1 to 30000 ms (default 20000); got {wait_ms!r}")
        self.client = client
        self.handlers = dict(handlers)
        self.worker_id = worker_id or f"py-{socket.gethostname()}-{os.getpid()}".replace("/", "-")[:128]
        self.wait_ms = wait_ms
        self.lease_seconds = lease_seconds
        #: Seconds between heartbeats; None: what the server asks for (``next_heartbeat_in``), at most a third of the lease.
        self.heartbeat_interval = heartbeat_interval
        if heartbeat_interval is not None and heartbeat_interval >= _DEFAULT_DEAD_AFTER:
            # As the TypeScript worker warns: not refused, the coordinators' thresholds may be raised to match.
            log.warning(
                "heartbeat_interval=%s: a coordinator at its default dead_after (%d s) declares this worker dead between its beats "
                "and takes its task back, discarding its result; beat more often, or run every coordinator and server with "
                "--stale-after and --dead-after above two intervals",
                heartbeat_interval,
                _DEFAULT_DEAD_AFTER,
            )
        self.tasks_processed = 0
        self._stopping = threading.Event()
        self._beats_stop = threading.Event()
        self._current: Optional[TaskContext] = None
        #: Held by a beat that lists no task, from reading that until its answer is in, and taken to make a claimed
        #: task the current one: such a beat (it says it lists every lease) has then landed before the task's lease
        #: is renewed, so a task it gave back is never run. Unordered, a thawed worker renewed the lease, its beat
        #: gave the task back, and the handler ran while another worker could claim it.
        self._beat_lock = threading.Lock()
        #: A task the last completion's answer brought (claim_next): run next, without a claim of its own;
        #: and when that completion was sent (time.monotonic()), its lease's start at the earliest.
        self._handed: Optional[Dict[str, Any]] = None
        self._handed_asked_at = 0.0
        self._max_tasks: Optional[int] = None
        self._waiting = False
        self._claims_failing = False
        #: When heartbeats started failing (time.monotonic()), None while they get through.
        self._beats_failing_since: Optional[float] = None
        self._next_beat = heartbeat_interval or 10.0
        #: This run (a worker runs once), sent with every beat: once it has shut down, a beat of it that lands late (held up, or
        #: sent again by a retry) leaves the worker inactive, where one of another run is a restart. Sent with the shutdown too:
        #: one landing after another run registered under the id changes nothing.
        self._run_id = str(uuid.uuid4())

    def stop(self) -> None:
        """Asks the worker to stop: no new claims; the running handler sees ``ctx.cancelled``."""
        self._stopping.set()

    def run(self, *, max_tasks: Optional[int] = None, handle_signals: bool = True) -> None:
        """Runs until stopped (or until ``max_tasks`` tasks were handled), then gives back what it holds and deregisters."""
        previous = self._install_signals() if handle_signals else {}
        self._max_tasks = max_tasks
        beats = threading.Thread(target=self._beat_loop, name=f"taskpool-heartbeat-{self.worker_id}", daemon=True)
        try:
            self._beat()
            beats.start()
            log.info("worker %s started: claiming %s", self.worker_id, ", ".join(self.handlers))
            while not self._stopping.is_set() and (max_tasks is None or self.tasks_processed < max_tasks):
                if self._handed is not None:
                    task, asked_at = self._handed, self._handed_asked_at
                else:
                    asked_at = time.monotonic()
                    task = self._claim()
                self._handed = None
                if task is not None:
                    self._run(task, asked_at)
        except _Interrupted:
            pass
        finally:
            self._stopping.set()
            self._beats_stop.set()
            if beats.is_alive():
                beats.join()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            # A last beat, so the registry keeps the final tasks_processed.
            self._beat()
            # The shutdown gives back whatever it holds, a task handed over but not run included.
            self._handed = None
            try:
                # Named, so that landing late (sent again after a lost answer) once the worker restarted under
                # its id, it leaves the new run and its tasks be.
                released = self.client.shutdown_worker(self.worker_id, run_id=self._run_id)
                if released:
                    log.info("worker %s gave back tasks %s", self.worker_id, released)
            except TaskpoolError as e:
                log.warning("worker %s could not deregister: %s", self.worker_id, e)

    def _claim(self) -> Optional[Dict[str, Any]]:
        try:
            self._waiting = True
            # A signal can land between the loop's check and here: do not start a wait then.
            if self._stopping.is_set():
                return None
            # Claimed and started in one request: the task is running when the handler is called.
            task = self.client.claim(self.worker_id, list(self.handlers), wait_ms=self.wait_ms, lease_seconds=self.lease_seconds, start=True)
            if self._claims_failing:
                self._claims_failing = False
                log.info("worker %s: claims succeed again", self.worker_id)
            return task
        except TaskpoolError as e:
            if e.status == 429 or e.status is None or e.status >= 500:
                pause = e.retry_after or 1.0
                # One warning per outage, not one a second while a server restarts; its end is said at info.
                if self._claims_failing:
                    log.debug("worker %s: claim failed (%s); trying again in %.1f s", self.worker_id, e, pause)
                else:
                    log.warning("worker %s: claim failed (%s); trying again in %.1f s", self.worker_id, e, pause)
                self._claims_failing = True
                self._stopping.wait(pause)
                return None
            raise
        finally:
            self._waiting = False

    def _run(self, task: Dict[str, Any], asked_at: float) -> None:
        ctx = TaskContext(self.client, self.worker_id, task, self._stopping, asked_at, self.lease_seconds)
        with self._beat_lock:
            self._current = ctx
        if not self._lease_holds(ctx, asked_at):
            self._current = None
            return
        handler = self.handlers[task["task_type"]]
        try:
            try:
                result = handler(ctx)
            except LeaseLost:
                log.warning("worker %s: lease of task %s lost; dropping it", self.worker_id, ctx.id)
                return
            except Cancelled:
                self._report(ctx, lambda: self.client.release(ctx.id, self.worker_id, ctx.lease_token, reason="worker shutting down"))
                return
            except Exception as e:  # noqa: BLE001 -- a handler's error fails the task, it must not end the worker
                message = f"{type(e).__name__}: {e}"[:10_000]
                # Its last 10,000 characters: the innermost frames, where it went wrong, come last.
                stack = "".join(traceback.format_exception(type(e), e, e.__traceback__))[-10_000:]
                retryable = None if not isinstance(e, PermanentError) else False
                if self._report(ctx, lambda: self.client.fail(ctx.id, self.worker_id, ctx.lease_token, message, retryable=retryable, stack=stack), "failed") is not None:
                    log.warning("worker %s: task %s (%s) failed: %s", self.worker_id, ctx.id, task["task_type"], message)
                return
            ctx._returned = True
            answer = self._report(ctx, lambda: self._complete(ctx, result), "completed")
            if answer is not None:
                log.info("worker %s: task %s (%s) completed", self.worker_id, ctx.id, task["task_type"])
            self._handed = next(iter((answer or {}).get("next_tasks", [])), None)
        finally:
            self._current = None
            self.tasks_processed += 1

    def _lease_holds(self, ctx: TaskContext, asked_at: float) -> bool:
        """Whether a task's lease still holds as its handler is about to start. A worker held up after its claim
        was answered (a process frozen, SIGSTOP, a VM paused) past half the lease renews it first, and runs
        nothing on a lease the coordinator may have handed on meanwhile: thawed, it ran the task beside the
        worker that had taken it over, or after that one had completed it."""
        held_up = time.monotonic() - asked_at
        if held_up < ctx._lease_seconds / 2:
            return True
        sent_at = time.monotonic()
        try:
            self.client.heartbeat(ctx.id, self.worker_id, ctx.lease_token)
        except LeaseLost:
            log.warning("worker %s: the lease of task %s was lost while the worker was held up %.0f s after claiming it; not running it", self.worker_id, ctx.id, held_up)
            return False
        except TaskpoolError as e:
            log.warning("worker %s: task %s not run: its lease could not be renewed after the worker was held up %.0f s (%s); it runs again once the lease ends", self.worker_id, ctx.id, held_up, e)
            return False
        ctx._renewed(sent_at)
        return True

    def _complete(self, ctx: TaskContext, result: Any) -> Dict[str, Any]:
        """Completes the task with its follow-ups; output the server refuses (or JSON cannot hold) fails it for good, saying why:
        running the handler again would do the work again and fail the same way. Unsendable, it ended the worker."""
        try:
            self._handed_asked_at = time.monotonic()
            return self.client.complete(ctx.id, self.worker_id, ctx.lease_token, result, ctx.follow_ups or None, claim_next=self._claim_next())
        except (TypeError, ValueError) as e:
            reason = f"its result or a follow-up is not JSON ({e})"
        except TaskpoolError as e:
            if e.code != "validation_error":
                raise
            reason = e.message
        message = f"Handler output rejected, task not completed: {reason}"[:10_000]
        self.client.fail(ctx.id, self.worker_id, ctx.lease_token, message, retryable=False)
        log.error("worker %s: task %s failed: %s", self.worker_id, ctx.id, message)
        return {}

    def _claim_next(self) -> Optional[Dict[str, Any]]:
        """What the completion should claim next: nothing once stopping or when this task is the last one asked for."""
        if self._stopping.is_set() or (self._max_tasks is not None and self.tasks_processed + 1 >= self._max_tasks):
            return None
        return _without_none({"task_types": list(self.handlers), "start": True, "lease_seconds": self.lease_seconds})

    def _report(self, ctx: TaskContext, call: Callable[[], Any], outcome: Optional[str] = None) -> Optional[Dict[str, Any]]:
        # Another worker may run the task by now: what this one found must not be reported.
        if ctx.lost:
            log.warning("worker %s: lease of task %s lost; its outcome is not reported", self.worker_id, ctx.id)
            return None
        try:
            return _through_outage(call, lambda: ctx.lost, f"report the outcome of task {ctx.id}")
        except LeaseLost:
            log.warning("worker %s: lease of task %s lost before its outcome was reported", self.worker_id, ctx.id)
            return None
        except TaskpoolError as e:
            if e.code == "invalid_transition" and outcome is not None and self._written_earlier(ctx, outcome):
                log.info("worker %s: task %s was %s by an earlier try whose answer was lost", self.worker_id, ctx.id, outcome)
                return None
            # Refused (the task was cancelled since the last heartbeat, say) or the server out of reach
            # for a minute: one task's outcome, never a reason to stop the worker. Unwritten, the task
            # runs again once its lease expires.
            log.warning("worker %s: the outcome of task %s was not recorded: %s", self.worker_id, ctx.id, e)
            return None

    def _written_earlier(self, ctx: TaskContext, status: str) -> bool:
        """Whether the task is already in the outcome's state under this worker's lease: a retried lease
        write whose first try was applied (its answer lost) is refused as an invalid transition."""
        try:
            task = self.client.get(ctx.id)["task"]
        except TaskpoolError:
            return False
        # invalid_transition, not lease_lost, already says the lease was this one; a task read answers no
        # lease_token (only its holder is told it), so the token is compared only if one came back.
        return task.get("status") == status and task.get("worker_id") == self.worker_id and task.get("lease_token") in (None, ctx.lease_token)

    def _beat_loop(self) -> None:
        while not self._beats_stop.wait(self._next_beat):
            try:
                self._beat()
            except Exception:  # noqa: BLE001 - the thread must outlive any one beat
                # An exception out of one beat ended the thread: the worker never beat again, was declared
                # dead and lost its task while it ran. It is said, and the next beat goes out as usual.
                log.exception("worker %s: heartbeat failed unexpectedly; trying again at the next interval", self.worker_id)

    def _beat(self) -> None:
        self._beat_lock.acquire()
        try:
            ctx = self._current
            # Only a beat that lists nothing gives a task back: it keeps the lock until its answer is in.
            if ctx is not None:
                self._beat_lock.release()
            self._beat_of(ctx)
        finally:
            if ctx is None:
                self._beat_lock.release()

    def _beat_of(self, ctx: Optional[TaskContext]) -> None:
        # Past its timeout a task's lease is left to run out (a hung handler must not hold it for ever):
        # the beat then lists no lease, and does not say it lists them all, or the server would take it back at once.
        renewing = ctx is not None and not ctx.lost and not ctx.timed_out
        leases = [{"task_id": ctx.id, "lease_token": ctx.lease_token}] if renewing else None
        sent_at = time.monotonic()
        try:
            answer = self.client.worker_heartbeat(
                self.worker_id,
                list(self.handlers),
                capacity=1,
                # Stopping, it takes no more work: said full, no coordinator reserves a dead worker's task for it.
                current_load=1 if ctx is not None or self._stopping.is_set() else 0,
                tasks_processed=self.tasks_processed,
                leases=leases,
                # It holds one task at most, listed: the server puts back in the pool a task leased to this
                # worker that it does not list, which it never heard of (its claim's answer was lost).
                all_leases=ctx is None or not ctx.timed_out,
                hostname=socket.gethostname()[:255],
                pid=os.getpid(),
                version=f"taskpool-python/{__version__}",
                run_id=self._run_id,
            )
        except TaskpoolError as e:
            # One warning per outage, not one per interval while it lasts (a minute's outage flooded the
            # log); its end is said at info, with how long it lasted.
            if self._beats_failing_since is None:
                self._beats_failing_since = time.monotonic()
                log.warning("worker %s: heartbeat failed: %s; trying again every interval", self.worker_id, e)
            else:
                log.debug("worker %s: heartbeat failed: %s", self.worker_id, e)
            return
        if self._beats_failing_since is not None:
            log.info("worker %s: heartbeats get through again, after failing for %.0f s", self.worker_id, time.monotonic() - self._beats_failing_since)
            self._beats_failing_since = None
        if ctx is not None and ctx.id in answer.get("lost", []):
            ctx._mark_lost()
        elif renewing and ctx is not None:
            ctx._renewed(sent_at)
        interval = self.heartbeat_interval or float(answer.get("next_heartbeat_in", 10))
        if self.lease_seconds:
            interval = min(interval, self.lease_seconds / 3)
        self._next_beat = interval

    def _install_signals(self) -> Dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}

        def on_signal(signum: int, _frame: Any) -> None:
            log.info("worker %s: %s; stopping", self.worker_id, signal.Signals(signum).name)
            self._stopping.set()
            # A claim waiting for work ends now (the server gives back a task it claimed meanwhile);
            # a running handler is only told, through ctx.cancelled, and finishes its own way.
            if self._waiting:
                raise _Interrupted()

        previous = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, on_signal)
        return previous


def _success(raw: bytes) -> Dict[str, Any]:
    body = json.loads(raw.decode("utf-8")) if raw else {}
    body.pop("success", None)
    return body


def _error(status: int, raw: bytes, headers: Any) -> TaskpoolError:
    try:
        body = json.loads(raw.decode("utf-8"))
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    code = body.get("error") or ("internal_error" if status >= 500 else "http_error")
    message = body.get("message") or raw.decode("utf-8", "replace")[:500] or f"HTTP {status}"
    retry_after = body.get("retry_after") or (headers.get("Retry-After") if headers is not None else None)
    error_class = LeaseLost if code == "lease_lost" else TaskpoolError
    return error_class(status, code, message, body, _seconds_until(retry_after))


#: The longest wait a Retry-After is taken at: a proxy's date a year away is no reason to sit idle that long.
_MAX_RETRY_AFTER = 300.0


def _seconds_until(retry_after: Any) -> Optional[float]:
    """A Retry-After as seconds to wait: its number of seconds, or the time until its HTTP date (RFC 9110
    allows either); None when it says neither. A date made every call raise ValueError, the worker's
    heartbeat thread included, which then never beat again."""
    if retry_after is None or retry_after == "":
        return None
    try:
        seconds = float(retry_after)
    except (TypeError, ValueError):
        try:
            seconds = (email.utils.parsedate_to_datetime(str(retry_after)) - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    return min(max(seconds, 0.0), _MAX_RETRY_AFTER) if seconds == seconds else None


#: Retries of a create, at least, unless the client has a ``retry_for``: with the default backoff
#: about 8 to 16 s in all, enough for the server to be restarted (a deploy). Safe, as every create
#: carries an Idempotency-Key.
_CREATE_RETRIES = 7

#: The longest ``retry_for``, a day: retrying longer is waiting on a server nobody is bringing back.
_MAX_RETRY_FOR = 86_400


def _lease_length(task: Dict[str, Any], fallback: Optional[float]) -> float:
    """A claimed task's lease in seconds, from the server's own times (its end less its claim: no clock of this
    machine's in it), else the one the worker asked for, else the server's default."""
    try:
        seconds = (_server_time(task["lease_expires_at"]) - _server_time(task["claimed_at"])).total_seconds()
        if seconds > 0:
            return seconds
    except (KeyError, TypeError, ValueError):
        pass
    return float(fallback or _DEFAULT_LEASE_SECONDS)


def _server_time(text: str) -> datetime.datetime:
    # Python before 3.11 does not read the Z of the server's ISO times.
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _task_id(task_id: Any) -> int:
    """A task id as the path takes it. int() read 2.9 as task 2 and True as task 1: cancel(3.5) cancelled task 3."""
    if isinstance(task_id, bool) or not isinstance(task_id, int) or task_id < 1:
        raise ValueError(f"a task id is a whole number from 1, as the API gave it (task[\"id\"]); got {task_id!r}")
    return task_id


def _idempotency(key: Optional[str]) -> Dict[str, str]:
    """The header that makes an enqueue safe to send again: the same key on every attempt of the call."""
    return {"Idempotency-Key": key if key is not None else str(uuid.uuid4())}


def _without_none(fields: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}
