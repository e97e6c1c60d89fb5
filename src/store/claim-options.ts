import { type ClaimOptions, DEFAULT_LEASE_SECONDS, type SortBy, type SortOrder } from "../core/task.js";

/** Checked claim options with every default applied. */
export interface ResolvedClaim {
  workerId: string;
  taskTypes: string[] | null;
  maxAttemptsRemaining: number | null;
  sortBy: SortBy;
  sortOrder: SortOrder;
  limit: number;
  leaseSeconds: number;
  start: boolean;
}

export function resolveClaim(options: ClaimOptions): ResolvedClaim {
  const sortBy = options.sortBy ?? "priority";
  return {
    workerId: options.workerId,
    taskTypes: options.taskTypes ?? null,
    maxAttemptsRemaining: options.maxAttemptsRemaining ?? null,
    sortBy,
    sortOrder: options.sortOrder ?? (sortBy === "created_at" ? "asc" : "desc"),
    limit: options.limit ?? 1,
    leaseSeconds: options.leaseSeconds ?? DEFAULT_LEASE_SECONDS,
    start: options.start ?? false,
  };
}
