import type { StoreKind } from "../helpers/stores.js";
import { apiKeysContract } from "./api-keys.contract.js";
import { batchContract } from "./batch.contract.js";
import { claimContract } from "./claim.contract.js";
import { enqueueContract } from "./enqueue.contract.js";
import { fencingContract } from "./fencing.contract.js";
import { hostileInputContract } from "./hostile-input.contract.js";
import { lifecycleContract } from "./lifecycle.contract.js";
import { queriesContract } from "./queries.contract.js";
import { taskTypesContract } from "./task-types.contract.js";
import { viewsContract } from "./views.contract.js";
import { workersContract } from "./workers.contract.js";

/** The definition of a correct store behind the checked API: every backend runs exactly this, unchanged. */
export function storeContract(kind: StoreKind): void {
  enqueueContract(kind);
  claimContract(kind);
  lifecycleContract(kind);
  fencingContract(kind);
  batchContract(kind);
  queriesContract(kind);
  workersContract(kind);
  taskTypesContract(kind);
  viewsContract(kind);
  hostileInputContract(kind);
  apiKeysContract(kind);
}
