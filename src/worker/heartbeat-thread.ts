/** Entry point of the heartbeat thread (see ThreadHeartbeats): its own store, its own timer. */
import { parentPort, workerData } from "node:worker_threads";
import { openStore } from "../store/open-store.js";
import { BeatLoop, type FromThread, type ThreadData, type ToThread } from "./heartbeats.js";

const { database, intervalMs, state: initial } = workerData as ThreadData;
let state = initial;
const port = parentPort!;
const post = (msg: FromThread) => port.postMessage(msg);

// The beats it sends were built by the worker from options the checked store already accepted at
// registration, so this raw store is enough (and the thread stays small).
const store = await openStore(database.url, { ...database, migrate: false });
const loop = new BeatLoop(store, () => state, {
  onLost: (leases) => post({ type: "lost", leases }),
  onRenewed: (sentAt, leases) => post({ type: "renewed", sentAt, leases }),
  onError: (error, sentAt) => post({ type: "error", message: error.message, sentAt }),
  onRecovered: () => post({ type: "recovered" }),
});
await loop.beat();
post({ type: "ready" });
loop.start(intervalMs);

port.on("message", async (msg: ToThread) => {
  if (msg.type === "state") {
    state = msg.state;
    return;
  }
  await loop.stop();
  await store.close();
  port.close();
});
