import type { Taskpool } from "../api/taskpool.js";
import type { BeatBatcher, WriteBatcher } from "../api/write-batcher.js";
import type { Coordinator } from "../coordinator/coordinator.js";
import type { LongPoll } from "./long-poll.js";

/** What route handlers are given besides the request: the pool and the server's few helpers. */
export interface ServerContext {
  pool: Taskpool;
  longPoll: LongPoll;
  /** Runs `POST /api/tasks/recover-stale`'s sweep with the coordinator's thresholds. */
  coordinator: Coordinator;
  /** Completions and failures of concurrent requests, written together (one statement and one commit per round trip). */
  writes: WriteBatcher;
  /** Worker heartbeats of concurrent requests, written together the same way. */
  beats: BeatBatcher;
  /** What a worker heartbeat answers as `next_heartbeat_in`. */
  heartbeatIntervalSeconds: number;
  /** Set by `app.taskpool.drain()`: the server still serves, but tells load balancers it is going. */
  lifecycle: { draining: boolean };
}
