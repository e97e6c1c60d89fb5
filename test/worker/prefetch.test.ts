import { describe, expect, it } from "vitest";
import { MAX_CLAIM_LIMIT } from "../../src/core/schemas.js";
import { Prefetch } from "../../src/worker/prefetch.js";

describe("Prefetch", () => {
  const quick = () => {
    const prefetch = new Prefetch(2, 20);
    prefetch.finished(0.5); // 2 slots × 50 ms / 0.5 ms = 200 tasks, capped at 20
    return prefetch;
  };

  it("holds nothing before a handler has finished, then what the handlers get through in 50 ms, at most max", () => {
    const prefetch = new Prefetch(2, 20);
    expect(prefetch.target).toBe(0);
    expect(prefetch.claimLimit(0, 0, 0)).toBe(2);
    prefetch.finished(0.5);
    expect(prefetch.target).toBe(20);
    prefetch.finished(500); // average 50.45 ms: under one task per slot in 50 ms
    expect(prefetch.target).toBe(1);
    expect(new Prefetch(2, 0).target).toBe(0);
  });

  it("does not top up a buffer that is more than half full, however many tasks left it", () => {
    const prefetch = quick();
    expect(prefetch.claimLimit(2, 19, 21)).toBe(0);
    expect(prefetch.claimLimit(2, 11, 13)).toBe(0);
  });

  it("tops up a half-empty buffer to the full window", () => {
    const prefetch = quick();
    expect(prefetch.claimLimit(2, 10, 12)).toBe(10);
    expect(prefetch.claimLimit(2, 0, 2)).toBe(20);
  });

  it("claims at once for a slot that would otherwise sit idle", () => {
    const prefetch = new Prefetch(4, 0); // no buffer: every claim fills idle slots
    expect(prefetch.claimLimit(3, 0, 3)).toBe(1);
    expect(prefetch.claimLimit(4, 0, 4)).toBe(0);
  });

  it("stops claiming while as many outcomes as it may run and hold wait on the database", () => {
    const prefetch = quick();
    expect(prefetch.claimLimit(0, 0, 44)).toBe(0);
    expect(prefetch.claimLimit(0, 0, 40)).toBe(4);
  });

  it("never asks for more than one claim may take, however large the window", () => {
    const prefetch = new Prefetch(30, 1500); // the default 50 × concurrency
    prefetch.finished(0.5); // 30 slots × 50 ms / 0.5 ms: the whole 1500
    expect(prefetch.claimLimit(0, 0, 0)).toBe(MAX_CLAIM_LIMIT);
  });
});
