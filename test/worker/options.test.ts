import { describe, expect, it } from "vitest";
import { ValidationError } from "../../src/core/errors.js";
import { resolveWorkerOptions, type WorkerOptions } from "../../src/worker/options.js";

const base: WorkerOptions = { roles: ["crawl"], handlers: { crawl: async () => {} } };
const refusal = (options: Record<string, unknown>) => {
  try {
    resolveWorkerOptions({ ...base, ...options } as WorkerOptions);
  } catch (error) {
    expect(error).toBeInstanceOf(ValidationError);
    return (error as Error).message;
  }
  throw new Error(`accepted ${JSON.stringify(options)}`);
};

describe("worker options", () => {
  // Each of these was accepted, then refused by every claim or heartbeat (in a log, the worker idle),
  // or turned a timer into a busy loop: Node fires a delay past 2^31 - 1 ms after 1 ms.
  it.each([
    [{ concurrency: 1.5 }, "concurrency: 1.5 (must be a whole number from 1 to 10000)"],
    [{ concurrency: 20_000 }, "concurrency: 20000 (must be a whole number from 1 to 10000)"],
    [{ concurrency: "4" }, 'concurrency: "4" (must be a whole number from 1 to 10000)'],
    [{ prefetch: 2.5 }, "prefetch: 2.5 (must be a whole number from 0 to 1000000)"],
    [{ leaseSeconds: 12.5 }, "leaseSeconds: 12.5 (must be a whole number from 1 to 86400)"],
    [{ leaseSeconds: 100_000 }, "leaseSeconds: 100000 (must be a whole number from 1 to 86400)"],
    [{ pollIntervalMs: 3e9 }, "pollIntervalMs: 3000000000 (must be a whole number from 10 to 2147483647)"],
    [{ shutdownGraceMs: 1e10 }, "shutdownGraceMs: 10000000000 (must be a whole number from 0 to 2147483647)"],
    [{ lastCallsMs: 0 }, "lastCallsMs: 0 (must be a whole number from 100 to 2147483647)"],
    [{ heartbeatIntervalMs: 3e9 }, "heartbeatIntervalMs: 3000000000 (must be a whole number from 10 to 43200000)"],
    // Accepted here, they were refused by the first beat at start(), the worker left holding its id.
    [{ version: 5 }, 'version: 5 (must be a text of 1 to 64 characters, such as "1.4.2")'],
    [{ version: "v".repeat(65) }, `version: "${"v".repeat(65)}" (must be a text of 1 to 64 characters, such as "1.4.2")`],
    [{ metadata: [1, 2] }, 'metadata: a list (must be an object, such as { "region": "eu" })'],
    [{ metadata: null }, 'metadata: null (must be an object, such as { "region": "eu" })'],
  ])("refuses %j at the call, saying the range", (options, message) => {
    expect(refusal(options)).toBe(`Invalid worker option ${message}`);
  });

  it("refuses metadata JSON cannot hold, naming the field", () => {
    expect(() => resolveWorkerOptions({ ...base, metadata: { since: new Date(0) } as never })).toThrow(/^Invalid metadata: metadata\.since is a Date/);
  });

  it("refuses a misspelt option rather than ignoring it, listing the options", () => {
    expect(refusal({ concurency: 10 })).toMatch(/^Invalid worker option concurency: unknown option \(the options are roles, handlers, workerId, concurrency, /);
  });

  it("says a handler that is not a function is one, rather than that there is none", () => {
    expect(refusal({ handlers: { crawl: 5 } as never })).toBe('Invalid handler for role "crawl": 5 is not a function; make it async (params, ctx) => { ... }');
    expect(refusal({ handlers: {} })).toMatch(/^No handler for role "crawl"/);
  });

  it("refuses a flag that is not a boolean, and a worker id that is not a string", () => {
    expect(refusal({ handleSignals: "yes" })).toBe('Invalid worker option handleSignals: "yes" (must be true or false)');
    expect(refusal({ heartbeatThread: "no" })).toBe('Invalid worker option heartbeatThread: "no" (must be true or false)');
    expect(refusal({ workerId: 5 })).toMatch(/^Invalid worker id "5"/);
  });

  it("holds 100 tasks per slot by default, 50 where claims run on the worker's thread (SQLite), for the largest worker too", () => {
    expect(resolveWorkerOptions({ ...base, concurrency: 10 }).prefetch).toBe(1000);
    expect(resolveWorkerOptions({ ...base, concurrency: 10 }, true).prefetch).toBe(500);
    expect(resolveWorkerOptions({ ...base, concurrency: 10_000 }).prefetch).toBe(1_000_000);
  });

  it("keeps the default lease of a long heartbeat interval within a claim's 24 h", () => {
    expect(resolveWorkerOptions({ ...base, heartbeatIntervalMs: 43_200_000 }).leaseSeconds).toBe(86_400);
    expect(resolveWorkerOptions({ ...base, heartbeatIntervalMs: 600_000 }).leaseSeconds).toBe(2400);
  });
});
