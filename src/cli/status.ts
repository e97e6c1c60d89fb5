import type { Command } from "commander";
import type { Store } from "../store/store.js";
import { dbOption, schemaOption, withStore } from "./database.js";

/** Task counts and the worker registry as plain tables. */
export async function printStatus(store: Store, out: (line: string) => void = console.log): Promise<void> {
  const counts = await store.counts();
  out(`Tasks: ${Object.entries(counts.byStatus).map(([s, n]) => `${s} ${n}`).join(", ")}`);
  for (const [type, byStatus] of Object.entries(counts.byType).sort()) {
    out(`  ${type.padEnd(24)} ${Object.entries(byStatus).map(([s, n]) => `${s} ${n}`).join(", ")}`);
  }
  const workers = await store.listWorkers();
  out(`Workers: ${workers.length}`);
  for (const w of workers) {
    out(`  ${w.workerId.padEnd(32)} ${w.status.padEnd(8)} load ${w.currentLoad}/${w.capacity} (${w.loadPercent}%)  active ${w.activeTasks}  seen ${w.secondsSinceHeartbeat}s ago  roles ${w.roles.join(",")}`);
  }
}

export function statusCommand(program: Command): void {
  program
    .command("status")
    .description("task counts by status and type, and the worker registry")
    .addOption(dbOption())
    .addOption(schemaOption())
    .action((opts: { db: string; schema?: string }) => withStore(opts, (store) => printStatus(store)));
}
