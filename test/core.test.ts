import { describe, expect, it } from "vitest";
import { retryDelayMs } from "../src/core/backoff.js";
import { InvalidTransitionError } from "../src/core/errors.js";
import { assertCanPerform, canPerform, TRANSITIONS } from "../src/core/state-machine.js";
import { TASK_STATUSES } from "../src/core/task.js";

describe("state machine", () => {
  it("allows exactly the transitions of the lifecycle", () => {
    const allowed = Object.fromEntries(
      Object.keys(TRANSITIONS).map((action) => [action, TASK_STATUSES.filter((s) => canPerform(action as keyof typeof TRANSITIONS, s))]),
    );
    expect(allowed).toEqual({
      claim: ["pending"],
      start: ["claimed"],
      heartbeat: ["claimed", "running"],
      checkpoint: ["claimed", "running"],
      progress: ["claimed", "running"],
      complete: ["claimed", "running"],
      fail: ["claimed", "running"],
      release: ["claimed", "running"],
      recover: ["claimed", "running"],
      cancel: ["pending", "claimed", "running"],
      retry: ["failed"],
      reserve: ["pending"],
    });
  });

  it("never leaves a terminal status except by manual retry of a failure", () => {
    for (const [action, { from }] of Object.entries(TRANSITIONS)) {
      const terminal = (from as readonly string[]).filter((s) => ["completed", "failed", "cancelled"].includes(s));
      expect(terminal).toEqual(action === "retry" ? ["failed"] : []);
    }
  });

  it("throws a typed error naming the task, action and status", () => {
    expect(() => assertCanPerform("complete", "pending", 7)).toThrow(InvalidTransitionError);
    expect(() => assertCanPerform("complete", "pending", 7)).toThrow("Cannot complete task 7: it is pending");
  });
});

describe("retry backoff", () => {
  const policy = { baseSeconds: 2, factor: 3, maxSeconds: 60, jitter: 0.5 };
  it("grows exponentially up to the cap", () => {
    expect([1, 2, 3, 4, 5].map((a) => retryDelayMs(policy, a, () => 0))).toEqual([2000, 6000, 18000, 54000, 60000]);
  });
  it("jitters downwards by at most the jitter fraction", () => {
    expect(retryDelayMs(policy, 1, () => 0.999999)).toBe(1000);
    expect(retryDelayMs({ ...policy, jitter: 0 }, 1, () => 0.9)).toBe(2000);
  });
});
