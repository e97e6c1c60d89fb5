/** Entry point of the heartbeat thread (see ThreadHeartbeats): its own store, its own timer. */
import { parentPort, workerData } from "node:worker_threads";
import { openStore } from "../store/open-store.js";
import { beatOf, type FromThread, lostLeases, type ThreadData, type ToThread } from "./heartbeats.js";

const { database, intervalMs, state: initial } = workerData as ThreadData;
let state = initial;
const port = parentPort!;
const post = (msg: FromThread) => port.postMessage(msg);

// The beats it sends were built by the worker from options the checked store already accepted at
// registration, so this raw store is enough (and the thread stays small).
const store = await openStore(database.url, { schema: database.schema, apiKey: database.apiKey, migrate: false });
let failing = false;
let beating: Promise<void> = Promise.resolve();

const beat = async () => {
  try {
    const sent = beatOf(state, Date.now());
    const { lost } = await store.workerHeartbeat(sent);
    if (failing) post({ type: "recovered" });
    failing = false;
    if (lost.length > 0) post({ type: "lost", leases: lostLeases(sent, lost) });
  } catch (error) {
    failing = true;
    post({ type: "error", message: (error as Error).message });
  }
};
await beat();
post({ type: "ready" });
const timer = setInterval(() => {
  beating = beat();
}, intervalMs);

port.on("message", async (msg: ToThread) => {
  if (msg.type === "state") {
    state = msg.state;
    return;
  }
  clearInterval(timer);
  await beating;
  await store.close();
  port.close();
});
