// The public HTTP API with the operator's key (X-API-Key), kept in localStorage; every failure is an ApiError carrying the API's envelope.
import { heardServerTime, serverNow } from "./server-clock.js";

const KEY_STORAGE = "taskpool.apiKey";

/** A refused or failed call: the HTTP status and the API's error code and message. */
export class ApiError extends Error {
  constructor(status, code, message, retryAfter) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }
}

let unauthorized = () => {};

/** Who hears a 401 from any call (the app shows the key form again). */
export function onUnauthorized(handler) {
  unauthorized = handler;
}

export const storedKey = () => localStorage.getItem(KEY_STORAGE);
export const saveKey = (key) => localStorage.setItem(KEY_STORAGE, key);
export const forgetKey = () => localStorage.removeItem(KEY_STORAGE);

/** One call; `path` is relative ("api/tasks") so the page also works behind a proxy under a sub-path. */
export async function api(method, path, body) {
  const headers = {};
  const key = storedKey();
  if (key) headers["x-api-key"] = key;
  if (body !== undefined) headers["content-type"] = "application/json";
  let response;
  const sentAt = Date.now();
  try {
    response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch {
    // No "retrying" here: polls do retry, but an action (retry, cancel, pause) is sent once, and said so beside its button.
    throw new ApiError(0, "network_error", "The server cannot be reached");
  }
  heardServerTime(response.headers.get("date"), sentAt, Date.now());
  let answer = {};
  try {
    answer = await response.json();
  } catch {
    // Not the API's JSON (a proxy's error page): fall through with the status alone.
  }
  if (!response.ok || answer.success !== true) {
    const error = new ApiError(response.status, answer.error ?? "http_error", answer.message ?? `HTTP ${response.status}`, retryAfter(answer, response));
    if (response.status === 401) unauthorized(error);
    throw error;
  }
  return answer;
}

/**
 * The seconds the server asked a caller to wait: the API's `retry_after`, or else the Retry-After
 * header (seconds or an HTTP date), which a proxy or load balancer answering 503 in its place may send.
 * Undefined when neither says.
 */
function retryAfter(answer, response) {
  if (typeof answer.retry_after === "number" && answer.retry_after >= 0) return answer.retry_after;
  const header = response.headers.get("retry-after")?.trim();
  if (!header) return undefined;
  if (/^\d+$/.test(header)) return Number(header);
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, (at - serverNow()) / 1000);
}

/** A query string from an object, leaving out empty values; arrays repeat the key. */
export function query(params) {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === "") continue;
    for (const item of Array.isArray(v) ? v : [v]) search.append(k, String(item));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}
