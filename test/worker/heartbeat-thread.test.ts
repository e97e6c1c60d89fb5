import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { openStore } from "../../src/store/open-store.js";
import { type Heartbeats, type HeartbeatState, ThreadHeartbeats } from "../../src/worker/heartbeats.js";

/** A fallback that records what the worker asks of it. */
function recordingFallback() {
  const calls: string[] = [];
  const made: Heartbeats[] = [];
  const make = (): Heartbeats => {
    const beats: Heartbeats = { ready: Promise.resolve(), changed: (now) => void calls.push(`changed ${now}`), stop: async () => void calls.push("stop") };
    made.push(beats);
    return beats;
  };
  return { calls, made, make };
}

const state = (): HeartbeatState => ({ beat: { workerId: "w", roles: ["crawl"], capacity: 1, currentLoad: 0, tasksProcessed: 0 }, leases: [] });
const errors: string[] = [];
const events = { onLost: () => {}, onRenewed: () => {}, onError: (error: Error) => void errors.push(error.message), onRecovered: () => {} };

describe("the heartbeat thread", () => {
  const dir = mkdtempSync(join(tmpdir(), "taskpool-beats-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("that cannot start is replaced by the fallback, which then gets the worker's calls", async () => {
    const fallback = recordingFallback();
    const missing = pathToFileURL(join(dir, "no-such-thread.js"));
    const beats = new ThreadHeartbeats({ url: `sqlite:${join(dir, "t.db")}` }, state, 1000, events, fallback.make, missing);
    await beats.ready;
    expect(fallback.made).toHaveLength(1);
    beats.changed(true);
    await beats.stop();
    expect(fallback.calls).toEqual(["changed true", "stop"]);
  });

  it("that runs and is stopped leaves the fallback unused", async () => {
    const url = `sqlite:${join(dir, "t.db")}`;
    await (await openStore(url)).close();
    const fallback = recordingFallback();
    errors.length = 0;
    const beats = new ThreadHeartbeats({ url }, state, 100, events, fallback.make);
    await beats.ready;
    beats.changed(true);
    await new Promise((r) => setTimeout(r, 300));
    await beats.stop();
    expect(errors).toEqual([]);
    expect(fallback.made).toEqual([]);
  });
});
