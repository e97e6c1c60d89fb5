import { describe, expect, it } from "vitest";
import { RunAbort } from "../../src/worker/run-abort.js";

describe("RunAbort", () => {
  it("fires a signal read before the abort, with the first reason", () => {
    const run = new RunAbort();
    const signal = run.signal;
    const heard: unknown[] = [];
    signal.addEventListener("abort", () => heard.push(signal.reason));
    run.abort("lease_lost");
    run.abort("shutdown");
    expect([run.aborted, run.reason, heard]).toEqual([true, "lease_lost", ["lease_lost"]]);
  });

  it("gives an already aborted signal when first read after the abort", () => {
    const run = new RunAbort();
    expect(run.aborted).toBe(false);
    run.abort("timeout");
    expect([run.signal.aborted, run.signal.reason]).toEqual([true, "timeout"]);
    expect(run.signal).toBe(run.signal);
  });
});
