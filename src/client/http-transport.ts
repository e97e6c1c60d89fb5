/**
 * HTTP requests to a taskpool server, with the retry rules a queue client needs: network errors
 * and 5xx are retried with backoff, 4xx never (the request was understood and refused; sending it
 * again changes nothing). A call that is not safe to repeat (a claim) is retried only when it
 * certainly never reached the server (no connection could be made, or a 502, 503 or 504 answer), so
 * a retry cannot claim twice. A connection lost after the request was written is not such a case,
 * even a kept-alive one: see `once`. Repeating a fenced lease write is safe: it is applied once and
 * refused after; so is repeating an enqueue, which always carries an idempotency key (HttpStore).
 *
 * node:http with a keep-alive agent rather than fetch: a worker makes many small requests and
 * fetch costs several times more CPU per request here.
 */
import http from "node:http";
import https from "node:https";
import { monotonicMs } from "../core/clock.js";
import { errorFromReply, ServerTimeoutError, ServerUnreachableError, type Subject } from "./errors.js";

export interface TransportOptions {
  /** Sent as X-API-Key. */
  apiKey?: string;
  /**
   * How long a call that failed in a retryable way is sent again, from its first attempt, every call
   * alike (ConnectOptions.retryForMs; 0: never). Default: DEFAULT_ATTEMPTS attempts, or a call's
   * `minAttempts`.
   */
  retryForMs?: number;
  /** Per-request time limit beyond a long-poll's own wait (default 30 s). */
  timeoutMs?: number;
  /**
   * The longest one call may take, its attempts and pauses together (ConnectOptions.callTimeoutMs):
   * an attempt's time limit is cut to what is left, and none starts after. Default: none, each
   * attempt having `timeoutMs`, as a worker riding out an outage wants; a one-shot command (the
   * CLI's) wants an answer within seconds.
   */
  callTimeoutMs?: number;
}

/** Whether a call may be sent again when it is unknown whether the server received it. */
export type Repeatable = "yes" | "only-if-unsent";

export interface Reply {
  status: number;
  body: Record<string, unknown>;
}

export interface RequestOptions {
  repeatable: Repeatable;
  /** Added to the time limit: the server holds a long-poll this long. */
  waitMs?: number;
  signal?: AbortSignal;
  /** What the call is about (a task id, a schedule name), for the error a refusal becomes. */
  subject?: Subject;
  /** Extra request headers (an enqueue's Idempotency-Key). */
  headers?: Record<string, string>;
  /** At least this many attempts for this call, unless the transport has a `retryForMs` (an enqueue outlasting a restart). */
  minAttempts?: number;
}

/** Attempts per call for retryable failures, unless `retryForMs` is given: about 2 to 3 s of backoff in all. */
const DEFAULT_ATTEMPTS = 6;

/** Failures of a request that never reached the server (safe to send again, whatever the call). */
const UNSENT_CODES = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH"]);

interface NetworkFailure extends Error {
  code?: string;
  unsent?: boolean;
}

/**
 * Why a request got no answer, in one line. OpenSSL's failures run over two, with its source file;
 * the one a user meets, "wrong version number", is an https:// URL given for a plain-HTTP server.
 */
function reasonOf(failure: NetworkFailure): string {
  if (/wrong version number/.test(failure.message)) return "TLS handshake failed: the server does not speak TLS; taskpool serve answers plain http://";
  return failure.message.split("\n")[0].trim();
}

export class HttpTransport {
  private readonly agent: http.Agent;
  private readonly request: typeof http.request;
  private readonly timeoutMs: number;
  /** Aborted by close(): a call pausing between attempts ends then, and sends nothing more. */
  private readonly closing = new AbortController();

  constructor(
    readonly baseUrl: URL,
    private readonly options: TransportOptions = {},
  ) {
    const secure = baseUrl.protocol === "https:";
    this.agent = new (secure ? https.Agent : http.Agent)({ keepAlive: true });
    this.request = secure ? https.request : http.request;
    this.timeoutMs = options.timeoutMs ?? 30_000;
  }

  /** Sends the request (retrying as the module comment says) and answers the 2xx reply; anything else throws the library's error for it. */
  async send(method: string, path: string, body: unknown, options: RequestOptions): Promise<Reply> {
    const started = monotonicMs();
    const { callTimeoutMs } = this.options;
    // A long-poll's wait is the server's to take, beyond the call's own time (a worker's 25 s wake-up wait).
    const deadline = callTimeoutMs === undefined ? Infinity : started + callTimeoutMs + (options.waitMs ?? 0);
    // Whether an earlier try was sent and its answer lost: it may have been applied, and a refusal of the
    // try that answered may be of the change the lost one made (see HttpStore.appliedEarlier).
    let lostAfterSending = false;
    for (let attempt = 1; ; attempt++) {
      let reply: Reply;
      try {
        reply = await this.once(method, path, body, options, deadline);
      } catch (error) {
        const failure = error as NetworkFailure;
        lostAfterSending ||= failure.unsent !== true;
        const fate = failure.unsent === true ? "unsent" : options.repeatable === "yes" ? "resent" : "not-resent";
        const key = options.subject !== undefined && "idempotencyKey" in options.subject ? options.subject.idempotencyKey : undefined;
        // A call with a time of its own that ends waiting for an answer says so, and whether it sent a change (a GET is none).
        // Its time, when that is what ended it: a timer fires a little late on a busy event loop.
        const unreachable = () =>
          callTimeoutMs !== undefined && failure.code === "ETIMEDOUT" && failure.unsent !== true
            ? new ServerTimeoutError(this.baseUrl.origin, Math.min(monotonicMs() - started, deadline - started), method !== "GET", key)
            : new ServerUnreachableError(this.baseUrl.origin, reasonOf(failure), fate, key, method === "GET");
        const pause = !options.signal?.aborted && (options.repeatable === "yes" || failure.unsent === true) ? this.pause(attempt, started, deadline, options) : null;
        if (pause === null) throw unreachable();
        if (!(await this.backoff(pause, options.signal))) throw unreachable();
        continue;
      }
      if (reply.status < 400) return reply;
      // 502/503/504 come before any work was done (a proxy, or a server not ready); another 5xx may
      // have come after a write, so only a repeatable call goes again.
      const unsent = reply.status === 502 || reply.status === 503 || reply.status === 504;
      const pause = reply.status >= 500 && (options.repeatable === "yes" || unsent) ? this.pause(attempt, started, deadline, options) : null;
      if (pause === null || !(await this.backoff(pause, options.signal))) {
        const refusal = errorFromReply(reply.status, reply.body, options.subject);
        if (lostAfterSending) Object.assign(refusal, { afterLostAnswer: true });
        throw refusal;
      }
    }
  }

  /** Ends every connection: a call still in flight is cut off (`server_unreachable`), none start, and one pausing to retry fails with its last error. Close once calls have finished, as a worker's stop() does. */
  close(): void {
    this.closing.abort();
    this.agent.destroy();
  }

  /** The pause before attempt `attempt + 1` of a call begun at `started`, or null when its retries or its time (`deadline`) are spent. */
  private pause(attempt: number, started: number, deadline: number, options: RequestOptions): number | null {
    const ms = Math.min(2000, 100 * 2 ** (attempt - 1)) * (0.5 + Math.random() / 2);
    if (monotonicMs() + ms >= deadline) return null;
    const { retryForMs } = this.options;
    if (retryForMs === undefined) return attempt < Math.max(DEFAULT_ATTEMPTS, options.minAttempts ?? 0) ? ms : null;
    // A pause that would end past the time allowed is cut short: the last attempt goes out as it ends.
    const left = started + retryForMs - monotonicMs();
    return left > 0 ? Math.min(ms, left) : null;
  }

  /**
   * Waits `ms`, or less if the call is aborted (its next attempt then fails at once, as an aborted
   * call does) or the transport closed; resolves false when closed (or closed already): no attempt follows.
   */
  private backoff(ms: number, signal?: AbortSignal): Promise<boolean> {
    const closing = this.closing.signal;
    if (closing.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", done);
        closing.removeEventListener("abort", done);
        resolve(!closing.aborted);
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener("abort", done, { once: true });
      closing.addEventListener("abort", done, { once: true });
    });
  }

  private once(method: string, path: string, body: unknown, options: RequestOptions, deadline: number): Promise<Reply> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string | number> = { accept: "application/json" };
    if (payload !== undefined) {
      headers["content-type"] = "application/json";
      headers["content-length"] = Buffer.byteLength(payload);
    }
    if (this.options.apiKey) headers["x-api-key"] = this.options.apiKey;
    Object.assign(headers, options.headers);
    const limit = this.timeoutMs + (options.waitMs ?? 0);
    const left = Math.max(1, Math.round(deadline - monotonicMs()));
    return new Promise<Reply>((resolve, reject) => {
      const req = this.request(new URL(path, this.baseUrl), { method, headers, agent: this.agent, signal: options.signal, timeout: limit });
      // Timed out before the connection was made (a host that swallows packets), nothing was sent.
      const timedOut = (ms: number) =>
        req.destroy(Object.assign(new Error(`no answer within ${ms} ms`), { code: "ETIMEDOUT", unsent: !req.socket || req.socket.connecting }));
      req.on("timeout", () => timedOut(limit));
      // `timeout` counts the socket's silence only: the call's deadline holds however the server trickles.
      const cutoff = left < limit ? setTimeout(() => timedOut(left), left) : undefined;
      req.on("close", () => clearTimeout(cutoff));
      req.on("error", (error: NetworkFailure) => {
        // Only a connection never made is certainly unsent. A reset of a kept-alive socket is not,
        // though Node documents retrying it for the race where the server closed the idle socket
        // just as it was reused: a server killed while handling the request (SIGKILL, a crash) resets
        // it the same way, after the write. Sent again once the server was back, an enqueue
        // without a unique key created its task twice (a server SIGKILLed and restarted in 2 s: 7
        // of 150 tasks doubled, every producer call answered "ok"); enqueues now carry an
        // idempotency key and are repeated as safe calls.
        // A TLS handshake refused (an https:// URL for a plain-HTTP server) comes before any request.
        error.unsent = error.unsent === true || UNSENT_CODES.has(error.code ?? "") || /wrong version number/.test(error.message);
        reject(error);
      });
      req.on("response", (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("error", reject);
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let parsed: Record<string, unknown>;
          try {
            parsed = text === "" ? {} : (JSON.parse(text) as Record<string, unknown>);
          } catch {
            // Most often an HTML page (another web server at the URL, a proxy's error): its start, on one line.
            const start = text.replace(/\s+/g, " ").trim().slice(0, 120);
            parsed = {
              success: false,
              error: "bad_reply",
              message: `the server at ${this.baseUrl.origin} answered ${res.statusCode} with something that is not taskpool's JSON ("${start}"); is it a taskpool server (taskpool serve), and is the URL right?`,
            };
          }
          resolve({ status: res.statusCode ?? 0, body: parsed });
        });
      });
      req.end(payload);
    });
  }
}
