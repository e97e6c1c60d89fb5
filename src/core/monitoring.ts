/** Seed 004's capacity planning for one task type (role). */
export interface CapacityRow {
  taskType: string;
  pendingTasks: number;
  /** Pending and due now (not scheduled later, not waiting for a retry). */
  readyTasks: number;
  /** Claimed or running. */
  runningTasks: number;
  /** Active workers of this role heard from within 2 minutes. */
  activeWorkers: number;
  completedLastHour: number;
  /** The registered cap on claimed + running tasks; null = none. */
  maxRunning: number | null;
  /** Completed in the last hour per active worker. */
  tasksPerWorkerHour: number | null;
  /** Pending / completed in the last hour; 0 with nothing pending, null without throughput. */
  estimatedHoursToDrain: number | null;
  /** Workers needed at today's rate to drain the pending tasks in 1, 4 and 8 hours; null without throughput. */
  workersNeeded: { for1Hour: number | null; for4Hours: number | null; for8Hours: number | null };
  /**
   * Seconds the longest-waiting ready task has waited since it was due (its `scheduledFor`: enqueued,
   * or due again after a retry's backoff); null when none is ready. The figure to alert on: it grows
   * when a role falls behind, whatever the size of its backlog.
   */
  oldestReadySeconds: number | null;
}

/** Seed 003's reassignment statistics. */
export interface ReassignmentStats {
  /** Reassignment attempts over the last 24 hours and how many found a worker. */
  last24Hours: { total: number; successful: number; successRatePercent: number | null };
  /** Workers whose tasks had to be taken back over the last 7 days, most first. */
  failingWorkers: { workerId: string | null; failureCount: number; lastFailureAt: Date }[];
  /** Tasks reassigned more than once, most first. */
  repeatedTasks: { taskId: number; reassignmentCount: number; lastReassignmentAt: Date }[];
}

/** Failed tasks of one type that failed with the same error: a group of the dead letter. */
export interface FailureGroup {
  taskType: string;
  /** The error they failed with, its first FAILURE_MESSAGE_SHOWN characters (each task keeps it whole); null when none was given. */
  errorMessage: string | null;
  /** The group's tasks among those read, newest failure first: retry them by id. */
  taskIds: number[];
  /** When the newest of them failed. */
  latestAt: Date;
}

/** The newest failed tasks, grouped: what the dashboard's Dead letter page shows. */
export interface Failures {
  /** Most tasks first, then the most recent. */
  groups: FailureGroup[];
  /** How many failed tasks were read: the newest `limit` at most. */
  read: number;
  /** Older failed tasks are left out (the Tasks listing pages through them all). */
  more: boolean;
}

/** Tasks that finished within one minute. */
export interface ThroughputMinute {
  /** The minute's start. */
  minute: Date;
  completed: number;
  /** Failed for good (into the dead letter); attempts that will be retried are not counted. */
  failed: number;
  /** Mean seconds from ready (`scheduled_for`) to the last claim, over the tasks that finished this minute; null when none did. */
  pickupSeconds: number | null;
}

/** Completed and failed tasks per minute over a recent window, and how long they waited to be picked up. */
export interface Throughput {
  /** One row per minute, oldest first; the last is the current, unfinished minute. */
  minutes: ThroughputMinute[];
  completed: number;
  failed: number;
  /** Pickup latency over the whole window, in seconds; null when nothing finished. */
  pickupSeconds: { mean: number | null; max: number | null };
}
