import type { StoreKind } from "../helpers/stores.js";
import { apiKeysContract } from "./api-keys.contract.js";
import { batchContract } from "./batch.contract.js";
import { claimContract } from "./claim.contract.js";
import { enqueueContract } from "./enqueue.contract.js";
import { failuresContract } from "./failures.contract.js";
import { fencingContract } from "./fencing.contract.js";
import { hostileInputContract } from "./hostile-input.contract.js";
import { idempotencyContract } from "./idempotency.contract.js";
import { lifecycleContract } from "./lifecycle.contract.js";
import { queriesContract } from "./queries.contract.js";
import { recountContract } from "./recount.contract.js";
import { registryContract } from "./registry.contract.js";
import { retentionContract } from "./retention.contract.js";
import { schedulesContract } from "./schedules.contract.js";
import { taskTypesContract } from "./task-types.contract.js";
import { throughputContract } from "./throughput.contract.js";
import { viewsContract } from "./views.contract.js";
import { workersContract } from "./workers.contract.js";

const PARTS = {
  enqueue: enqueueContract,
  idempotency: idempotencyContract,
  claim: claimContract,
  lifecycle: lifecycleContract,
  fencing: fencingContract,
  batch: batchContract,
  queries: queriesContract,
  workers: workersContract,
  registry: registryContract,
  taskTypes: taskTypesContract,
  views: viewsContract,
  throughput: throughputContract,
  failures: failuresContract,
  hostileInput: hostileInputContract,
  apiKeys: apiKeysContract,
  schedules: schedulesContract,
  retention: retentionContract,
  recount: recountContract,
};

/** A part of the contract, by name. */
export type ContractPart = keyof typeof PARTS;

/**
 * The definition of a correct store behind the checked API: every backend runs exactly this,
 * unchanged. A client of a store over a network (the HTTP transport) runs the parts a client makes
 * calls for.
 */
export function storeContract(kind: StoreKind, parts: readonly ContractPart[] = Object.keys(PARTS) as ContractPart[]): void {
  for (const part of parts) PARTS[part](kind);
}
