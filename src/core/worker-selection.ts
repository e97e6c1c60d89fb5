/** A worker that could take a reassigned task, with the load it has right now. */
export interface Candidate {
  workerId: string;
  roles: string[];
  capacity: number;
  load: number;
}

/**
 * Seed 003's choice: among healthy workers of the task's role with spare capacity, the lowest load
 * percentage (ties: fewer tasks, then the id, so the choice is deterministic). The caller passes
 * only active workers with a recent heartbeat (full ones included, see whyUnassigned) and adds the
 * task to the winner's load before the next pick, so one sweep spreads a dead worker's tasks instead
 * of piling them on one survivor.
 */
export function pickWorker(candidates: Candidate[], taskType: string, exclude: string | null): Candidate | null {
  let best: Candidate | null = null;
  for (const c of candidates) {
    if (c.workerId === exclude || c.load >= c.capacity || !c.roles.includes(taskType)) continue;
    if (!best || compareLoad(c, best) < 0) best = c;
  }
  return best;
}

function compareLoad(a: Candidate, b: Candidate): number {
  return a.load / a.capacity - b.load / b.capacity || a.load - b.load || a.workerId.localeCompare(b.workerId);
}

/** A task the sweep put back in the pool, as reassignment sees it. */
export interface RecoveredTask {
  id: number;
  taskType: string;
  /** The worker that held it. */
  fromWorkerId: string | null;
  /** Why it was taken back (worker died, lease expired). */
  reason: string;
}

export interface ReassignmentPlan {
  assigned: (RecoveredTask & { workerId: string })[];
  /** `errorMessage` says why no worker took it; both stores record it as the reassignment's error. */
  unassigned: (RecoveredTask & { errorMessage: string })[];
}

/** Chooses a worker for each task, in the order given (highest priority first). */
export function planReassignments(tasks: RecoveredTask[], candidates: Candidate[]): ReassignmentPlan {
  const plan: ReassignmentPlan = { assigned: [], unassigned: [] };
  const pool = candidates.map((c) => ({ ...c }));
  for (const task of tasks) {
    const chosen = pickWorker(pool, task.taskType, task.fromWorkerId);
    if (!chosen) {
      plan.unassigned.push({ ...task, errorMessage: whyUnassigned(pool, task) });
      continue;
    }
    chosen.load++;
    plan.assigned.push({ ...task, workerId: chosen.workerId });
  }
  return plan;
}

/**
 * An operator must tell "start workers of this role" from "add capacity to them". Each reason starts
 * with seed 003's "No healthy worker available", which monitoring matches.
 */
function whyUnassigned(pool: Candidate[], task: RecoveredTask): string {
  const role = task.taskType;
  const ofRole = pool.filter((c) => c.roles.includes(role));
  const others = ofRole.filter((c) => c.workerId !== task.fromWorkerId);
  if (others.length === 1) return `No healthy worker available: the only healthy worker for role ${role} is at capacity`;
  if (others.length > 1) return `No healthy worker available: all ${others.length} healthy workers for role ${role} are at capacity`;
  // The previous holder is healthy only when its lease expired; it is never given the task back.
  return ofRole.length > 0 ? `No healthy worker available for role ${role} besides its previous holder ${task.fromWorkerId}` : `No healthy worker available for role ${role}`;
}
