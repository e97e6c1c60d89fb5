/**
 * One schema per input (TypeBox). The checked API (src/api/) validates every input against these
 * before any store sees it, the TypeScript types of those inputs are derived from them, and the HTTP
 * routes will reuse them, so there is one definition of what is accepted.
 *
 * Values stored as JSON (params, checkpoints, results, metadata) are typed as Json here and checked
 * by the JSON rules in validation.ts, which name the bad field and apply the size limits.
 */
import { LATEST_STORABLE_TIME, MAX_KEY_LENGTH, SORT_BY, TASK_STATUSES, type Json, type JsonObject } from "./task.js";
import { FormatRegistry, type Static, Type } from "./typebox.js";
import { MAX_LIVE_LISTED, RECOVERY_POLICIES, WORKER_STATUSES } from "./worker.js";
import { API_KEY_SCOPES } from "./api-key.js";
import { MISSED_TICK_POLICIES } from "./schedule.js";

/** Task types name roles: a letter first, then letters, digits, `_ . : -`. */
export const TASK_TYPE_PATTERN = "^[A-Za-z][A-Za-z0-9_.:-]{0,127}$";
export const WORKER_ID_PATTERN = "^[A-Za-z0-9_.-]{1,128}$";

/** A choice among fixed values, whose error lists them. */
const OneOf = <T extends string>(values: readonly T[]) => Type.Union(values.map((v) => Type.Literal(v)), { description: `one of ${values.join(", ")}` });

/** Text PostgreSQL and SQLite both store unchanged: no NUL character (PostgreSQL refuses it in text and jsonb), no unpaired UTF-16 surrogate (not valid UTF-8 anywhere). */
export const TEXT_FORMAT = "storable-text";
export const isStorableText = (s: string) => !s.includes("\0") && s.isWellFormed();
// Registered with the schemas, so whatever compiles them (the checked API, Fastify) knows the format.
FormatRegistry.Set(TEXT_FORMAT, isStorableText);
const Text = (options: { minLength?: number; maxLength: number; description?: string }) => Type.String({ ...options, format: TEXT_FORMAT });

const Int32 = { minimum: -2147483648, maximum: 2147483647 };
/** Dates both stores can hold (see LATEST_STORABLE_TIME). */
const StorableDate = Type.Date({ minimumTimestamp: Date.UTC(1970, 0, 1), maximumTimestamp: LATEST_STORABLE_TIME });

/** JSON checked by the JSON rules, not by the schema (they name the bad field and apply size limits). */
export const JsonValue = Type.Unsafe<Json>(Type.Unknown({ description: "any JSON value" }));
const JsonObjectValue = Type.Unsafe<JsonObject>(Type.Record(Type.String(), Type.Unknown(), { description: "a JSON object" }));

export const TaskId = Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: "a task id" });
export const TaskTypeName = Type.String({ pattern: TASK_TYPE_PATTERN, description: "a letter, then letters, digits, _ . : - (128 at most), e.g. product_resync" });
export const WorkerId = Type.String({ pattern: WORKER_ID_PATTERN, description: "letters, digits, _ . - (1 to 128), e.g. worker-1" });
export const LeaseToken = Type.String({ minLength: 1, maxLength: 64, pattern: "^[A-Za-z0-9-]+$", description: "the lease_token the claim returned" });
/** Seconds of a lease or a leadership term; fractions are fine. */
export const Seconds = Type.Number({ minimum: 0.001, maximum: 86400 });

export const BackoffInputSchema = Type.Object(
  {
    baseSeconds: Type.Optional(Type.Number({ minimum: 0, maximum: 86400 })),
    factor: Type.Optional(Type.Number({ minimum: 1, maximum: 10 })),
    maxSeconds: Type.Optional(Type.Number({ minimum: 0, maximum: 30 * 86400 })),
    jitter: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
  },
  { additionalProperties: false },
);

// Task fields a producer may set on a task and a registered type may default.
const Priority = Type.Integer(Int32);
const MaxAttempts = Type.Integer({ minimum: 1, maximum: 1000 });
const TimeoutSeconds = Type.Integer({ minimum: 1, maximum: 7 * 86400 });
/** Ten years: a due time must stay a storable date (before 9999) whatever the clock says. */
export const MAX_DELAY_SECONDS = 10 * 366 * 86400;

export const EnqueueInputSchema = Type.Object(
  {
    taskType: TaskTypeName,
    params: Type.Optional(JsonObjectValue),
    priority: Type.Optional(Priority),
    scheduledFor: Type.Optional(StorableDate),
    /**
     * Not claimable before this many seconds from now, by the store's clock (the database's on
     * PostgreSQL): unlike a scheduledFor the producer computes from its own clock, a producer host
     * whose clock is off does not move it. Instead of scheduledFor.
     */
    delaySeconds: Type.Optional(
      Type.Number({ minimum: 0, maximum: MAX_DELAY_SECONDS, description: "not claimable before this many seconds from now, by the database's clock (instead of scheduled_for)" }),
    ),
    /** At most one claimed/running task per key (e.g. one crawl per store), whatever their types. */
    concurrencyKey: Type.Optional(Text({ minLength: 1, maxLength: MAX_KEY_LENGTH, description: "at most one claimed or running task per key, across all task types" })),
    /**
     * While a pending task holds this key, enqueueing another with it returns the existing task. Keys
     * span task types, as concurrency keys do: name the type in the key to dedupe per type.
     */
    uniqueKey: Type.Optional(
      Text({
        minLength: 1,
        maxLength: MAX_KEY_LENGTH,
        description: "while a pending task holds this key, enqueueing with it returns that task (created: false), whatever its type: put the type in the key (resync:store:42) to dedupe per type",
      }),
    ),
    maxAttempts: Type.Optional(MaxAttempts),
    backoff: Type.Optional(BackoffInputSchema),
    timeoutSeconds: Type.Optional(TimeoutSeconds),
  },
  { additionalProperties: false },
);
/** What a producer supplies; everything but the type is optional. */
export type EnqueueInput = Static<typeof EnqueueInputSchema>;
/**
 * A producer's name for one enqueue call, so the call can be sent again (its answer was lost) without
 * creating its tasks twice. Visible ASCII only: it travels as an HTTP header, whose value a proxy may
 * trim or fold, and a key that changed on the way would create the tasks again.
 */
export const IdempotencyKey = Type.String({
  minLength: 1,
  maxLength: MAX_KEY_LENGTH,
  pattern: "^[!-~]+$",
  description: "1 to 255 visible ASCII characters, no spaces (a UUID is the usual choice)",
});

/** Options of one enqueue call (single or batch), as opposed to those of each task. */
export const EnqueueCallOptionsSchema = Type.Object(
  {
    /** A second call with this key within the key's lifetime (IDEMPOTENCY_KEY_SECONDS) creates nothing and answers the first call's tasks. */
    idempotencyKey: Type.Optional(IdempotencyKey),
  },
  { additionalProperties: false },
);
export type EnqueueCallOptions = Static<typeof EnqueueCallOptionsSchema>;

/** enqueue's options: everything of EnqueueInput but the type and params, and the call's own options. */
export type EnqueueOptions = Omit<EnqueueInput, "taskType" | "params"> & EnqueueCallOptions;

/** A batch's shape; each item is then checked against EnqueueInputSchema, so an error names its index. */
export const EnqueueBatchSchema = Type.Array(Type.Unknown(), { maxItems: 10_000, description: "a list of tasks" });

export const TaskTypeDefinitionSchema = Type.Object(
  {
    name: TaskTypeName,
    description: Type.Optional(Text({ maxLength: 2000 })),
    /** JSON Schema (draft-07) that every task's params must satisfy; omitted = any JSON object. */
    paramsSchema: Type.Optional(Type.Unsafe<JsonObject>(Type.Record(Type.String(), Type.Unknown(), { description: "a JSON Schema (draft-07) object" }))),
    /** Defaults for the fields a producer leaves out of enqueue. */
    priority: Type.Optional(Priority),
    maxAttempts: Type.Optional(MaxAttempts),
    backoff: Type.Optional(BackoffInputSchema),
    timeoutSeconds: Type.Optional(TimeoutSeconds),
    /** What the coordinator does with a task whose worker died (default `retry`). */
    recoveryPolicy: Type.Optional(OneOf(RECOVERY_POLICIES)),
    /** At most this many tasks of the type claimed or running at once, across all workers; omitted = no cap. */
    maxRunning: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000 })),
  },
  { additionalProperties: false },
);
/**
 * What a producer registers for a task type: a schema its params must satisfy and the defaults and
 * policy of its tasks. Registering is optional; unregistered types run on the built-in defaults.
 */
export type TaskTypeDefinition = Static<typeof TaskTypeDefinitionSchema>;

/** The most tasks one claim may take (a worker's batch claims stay under it, see worker/prefetch.ts). */
export const MAX_CLAIM_LIMIT = 1000;

export const ClaimOptionsSchema = Type.Object(
  {
    workerId: WorkerId,
    /** Task types this worker may run; omitted = any type. */
    taskTypes: Type.Optional(Type.Array(TaskTypeName, { minItems: 1, maxItems: 100 })),
    /** Only tasks with more than this many attempts left before the claim (max_attempts - attempts > n, seed 002's `attempts < max_attempts - n`): at least n left after it. */
    maxAttemptsRemaining: Type.Optional(
      Type.Integer({ minimum: 0, maximum: 1000, description: "only tasks that keep at least this many attempts after this claim (max_attempts - attempts > n); 0: any" }),
    ),
    sortBy: Type.Optional(OneOf(SORT_BY)),
    /** Default: desc for priority (higher first), asc for created_at (oldest first). */
    sortOrder: Type.Optional(OneOf(["asc", "desc"])),
    /** How many tasks to claim at most (default 1). */
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_CLAIM_LIMIT })),
    /** How long the lease lasts without a heartbeat (default 120 s). */
    leaseSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 86400 })),
    /** Start the claimed tasks at once (status `running`, a `started` event each), saving a round trip per task. */
    start: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
/** Filters and limits of a claim (seed 002's contract plus a batch limit). */
export type ClaimOptions = Static<typeof ClaimOptionsSchema>;

export const ClaimByIdOptionsSchema = Type.Object({ workerId: WorkerId, leaseSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 86400 })) }, { additionalProperties: false });
export type ClaimByIdOptions = Static<typeof ClaimByIdOptionsSchema>;

export const LeaseSchema = Type.Object({ workerId: WorkerId, leaseToken: LeaseToken });
/** Proof of ownership: the worker and the token its claim returned. */
export type Lease = Static<typeof LeaseSchema>;

export const HeartbeatOptionsSchema = Type.Object(
  {
    leaseSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 86400 })),
    progress: Type.Optional(Type.Number({ minimum: 0, maximum: 1, description: "0 to 1" })),
  },
  { additionalProperties: false },
);
export type HeartbeatOptions = Static<typeof HeartbeatOptionsSchema>;

export const ProgressSchema = Type.Number({ minimum: 0, maximum: 1, description: "0 to 1" });

/** Longest failure message or stack stored; longer ones are cut to it (truncatedMessage), not refused. */
export const MAX_MESSAGE_LENGTH = 10_000;

/**
 * The longest failure message or stack a call may send. Cut to MAX_MESSAGE_LENGTH when stored: a
 * failure refused for a long stack (a Java trace passes 10,000 characters easily) was not recorded at
 * all, and its task stayed leased until its lease ran out.
 */
const MAX_FAILURE_TEXT_SENT = 1_000_000;

/** `text` cut to MAX_MESSAGE_LENGTH, said so, and still well-formed where the cut falls in a surrogate pair. */
export const truncatedMessage = (text: string): string =>
  text.length <= MAX_MESSAGE_LENGTH ? text : `${text.slice(0, MAX_MESSAGE_LENGTH - 20).toWellFormed()}… (truncated)`;

export const CompleteOptionsSchema = Type.Object(
  {
    result: Type.Optional(JsonValue),
    /** Tasks created in the same transaction as the completion, with this task as parent. */
    followUps: Type.Optional(Type.Array(EnqueueInputSchema, { maxItems: 1000 })),
  },
  { additionalProperties: false },
);
export type CompleteOptions = Static<typeof CompleteOptionsSchema>;

export const FailOptionsSchema = Type.Object(
  {
    error: Text({ maxLength: MAX_FAILURE_TEXT_SENT, description: `what went wrong; stored cut to ${MAX_MESSAGE_LENGTH} characters` }),
    /** false = go straight to `failed`, whatever attempts remain. */
    retryable: Type.Optional(Type.Boolean()),
    stack: Type.Optional(Text({ maxLength: MAX_FAILURE_TEXT_SENT, description: `where it went wrong: the error's stack trace (with its causes), kept in the failure's event as data.stack, cut to ${MAX_MESSAGE_LENGTH} characters` })),
  },
  { additionalProperties: false },
);
export type FailOptions = Static<typeof FailOptionsSchema>;

/** One completion of a batch (see Store.completeMany); follow-ups go through complete(). */
export const CompletionSchema = Type.Object({ id: TaskId, lease: LeaseSchema, result: Type.Optional(JsonValue) }, { additionalProperties: false });
export type Completion = Static<typeof CompletionSchema>;

/** One failure of a batch (see Store.failMany). */
export const FailureSchema = Type.Object(
  { id: TaskId, lease: LeaseSchema, error: FailOptionsSchema.properties.error, retryable: Type.Optional(Type.Boolean()), stack: FailOptionsSchema.properties.stack },
  { additionalProperties: false },
);
export type Failure = Static<typeof FailureSchema>;

/** A batched write's shape; each item is then checked on its own, so one bad item refuses only itself. */
export const BatchSchema = Type.Array(Type.Unknown(), { maxItems: 1000, description: "a list of at most 1000 items" });

export const ReleaseOptionsSchema = Type.Object(
  { checkpoint: Type.Optional(JsonValue), reason: Type.Optional(Text({ maxLength: MAX_MESSAGE_LENGTH })) },
  { additionalProperties: false },
);
export type ReleaseOptions = Static<typeof ReleaseOptionsSchema>;

export const CancelOptionsSchema = Type.Object({ reason: Type.Optional(Text({ maxLength: MAX_MESSAGE_LENGTH })) }, { additionalProperties: false });
export type CancelOptions = Static<typeof CancelOptionsSchema>;

export const RetryOptionsSchema = Type.Object(
  {
    /** Start again from nothing: the checkpoint and progress are cleared (kept by default, so a retry resumes where the last attempt got to). */
    resetCheckpoint: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type RetryOptions = Static<typeof RetryOptionsSchema>;

const TaskStatusSchema = OneOf(TASK_STATUSES);
/** The orders a task list can be read in (an allowlist: the order is never built from input). */
export const LIST_ORDERS = ["newest", "oldest"] as const;

export const TaskFilterSchema = Type.Object(
  {
    status: Type.Optional(
      Type.Union([TaskStatusSchema, Type.Array(TaskStatusSchema, { minItems: 1, maxItems: TASK_STATUSES.length })], {
        description: `one of ${TASK_STATUSES.join(", ")}, or a list of at most ${TASK_STATUSES.length} of them`,
      }),
    ),
    taskType: Type.Optional(TaskTypeName),
    workerId: Type.Optional(WorkerId),
    /** Tasks whose params, as JSON text, contain this text (case-insensitive), e.g. a store id. */
    search: Type.Optional(Text({ minLength: 1, maxLength: 200, description: "text the task's params contain, case-insensitive (1 to 200 characters)" })),
  },
  { additionalProperties: false },
);
export type TaskFilter = Static<typeof TaskFilterSchema>;

/** Only a task's latest this many events (still oldest first); default all. A task that saved a checkpoint per page has tens of thousands. */
const EventsLimit = Type.Integer({ minimum: 0, maximum: 100_000 });

/** What `events` reads of a task's audit trail. */
export const EventsQuerySchema = Type.Object({ limit: Type.Optional(EventsLimit) }, { additionalProperties: false });
export type EventsQuery = Static<typeof EventsQuerySchema>;

/** What `GET /api/tasks/:id` reads of its events: its query string. */
export const TaskWithEventsQuerySchema = Type.Object({ eventsLimit: Type.Optional(EventsLimit) }, { additionalProperties: false });

export const PageSchema = Type.Object(
  {
    /** Opaque cursor from a previous page's `nextCursor`. */
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    /** 1..1000, default 100. */
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    /** `newest` first (default) or `oldest` first. */
    order: Type.Optional(OneOf(LIST_ORDERS)),
  },
  { additionalProperties: false },
);
export type Page = Static<typeof PageSchema>;

const WorkerStatusSchema = OneOf(WORKER_STATUSES);

/**
 * What a page of the worker registry holds (Store.listWorkers): workers of these statuses (default
 * all), or the one worker named; `limit` gone workers a page (live ones are listed in full, up to
 * MAX_LIVE_LISTED); a cursor from the page before.
 */
export const WorkerQuerySchema = Type.Object(
  {
    status: Type.Optional(
      Type.Union([WorkerStatusSchema, Type.Array(WorkerStatusSchema, { minItems: 1, maxItems: WORKER_STATUSES.length })], {
        description: `one of ${WORKER_STATUSES.join(", ")}, or a list of at most ${WORKER_STATUSES.length} of them`,
      }),
    ),
    workerId: Type.Optional(WorkerId),
    /** 1..1000, default 100 (DEFAULT_GONE_LISTED). */
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, description: `gone (dead, inactive) workers a page lists, 1 to 1000 (default 100); live ones are listed in full, up to ${MAX_LIVE_LISTED} a page` })),
    /** Opaque cursor from a previous page's `nextCursor`; it carries a worker id, hence longer than a task list's. */
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 400 })),
  },
  { additionalProperties: false },
);
export type WorkerQuery = Static<typeof WorkerQuerySchema>;

export const ReassignmentQuerySchema = Type.Object(
  { limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })), taskId: Type.Optional(TaskId) },
  { additionalProperties: false },
);
export type ReassignmentQuery = Static<typeof ReassignmentQuerySchema>;

/**
 * The characters of an error a dead-letter group answers: failures' messages run to 10,000 characters,
 * and a thousand groups of them made megabytes a poll. A task's own read has it whole.
 */
export const FAILURE_MESSAGE_SHOWN = 1000;

/** How many failed tasks `failures()` reads, newest first, by default and at most. */
export const FAILURES_READ = { default: 1000, max: 10_000 } as const;

/** The failed tasks `failures()` groups: the newest `limit` (by failure time). */
export const FailuresQuerySchema = Type.Object(
  { limit: Type.Optional(Type.Integer({ minimum: 1, maximum: FAILURES_READ.max, description: `the newest failed tasks read (default ${FAILURES_READ.default})` })) },
  { additionalProperties: false },
);
export type FailuresQuery = Static<typeof FailuresQuerySchema>;

/** The longest window of `throughput()`: a day. */
export const MAX_THROUGHPUT_MINUTES = 1440;

/**
 * The window of `throughput()`: the last `minutes` minutes, the current one included (default 60, at
 * most a day); with `taskType`, the tasks of that type only.
 */
export const ThroughputQuerySchema = Type.Object(
  { minutes: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_THROUGHPUT_MINUTES })), taskType: Type.Optional(TaskTypeName) },
  { additionalProperties: false },
);
export type ThroughputQuery = Static<typeof ThroughputQuerySchema>;

/**
 * What a beat may leave out of the worker's figures (seed 000's beat is `worker_id` and `metadata`
 * alone): the registry keeps what the worker said last, and a new worker gets these. Both stores'
 * upserts write them (`coalesce(given, registered, default)`); the worker contract checks they agree.
 */
export const WORKER_BEAT_DEFAULTS = { roles: [] as string[], capacity: 1, currentLoad: 0, tasksProcessed: 0 } as const;
const KEPT = "omitted: what the worker's last heartbeat said";

/** A run of a worker (the runtime makes a UUID at each start), as its beats and its shutdown name it. */
const RunId = (description: string) => Type.String({ minLength: 1, maxLength: 64, pattern: "^[A-Za-z0-9_.:-]+$", description });

export const WorkerBeatSchema = Type.Object(
  {
    workerId: WorkerId,
    /**
     * This run of the worker (the runtime makes a UUID at each start). A beat of a run that has shut down
     * leaves the worker inactive however late it lands; a beat of another run is a restart.
     */
    runId: Type.Optional(
      RunId(
        "this run of the worker, unique to it (a UUID made at its start): a beat of a run that has shut down, arriving late or sent again, leaves the worker inactive; a beat of another run is a restart",
      ),
    ),
    roles: Type.Optional(Type.Array(TaskTypeName, { minItems: 1, maxItems: 100, description: `the task types it claims; ${KEPT}, none for a new worker` })),
    hostname: Type.Optional(Text({ maxLength: 255 })),
    pid: Type.Optional(Type.Integer({ minimum: 0, maximum: Int32.maximum })),
    version: Type.Optional(Text({ maxLength: 64 })),
    /** Max concurrent tasks. */
    capacity: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000, description: `max concurrent tasks; ${KEPT}, 1 for a new worker` })),
    currentLoad: Type.Optional(Type.Integer({ minimum: 0, maximum: 10_000, description: `tasks it runs now; ${KEPT}, 0 for a new worker` })),
    tasksProcessed: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: `tasks it finished since it started; ${KEPT}, 0 for a new worker` })),
    metadata: Type.Optional(JsonObjectValue),
    /** The leases of its running tasks, renewed by the same call. */
    leases: Type.Optional(Type.Array(Type.Object({ taskId: TaskId, leaseToken: LeaseToken }, { additionalProperties: false }), { maxItems: 10_000 })),
    /**
     * `leases` lists every task the worker holds: one leased to it over half its lease ago that the beat
     * leaves out goes back in the pool at once (its claim's answer was lost, or the worker restarted).
     */
    allLeases: Type.Optional(Type.Boolean({ description: "leases lists every task this worker holds: a task leased to it over half its lease ago that the beat leaves out (a claim whose answer was lost, a restart under the same id) goes back in the pool at once, not when its lease runs out" })),
  },
  { additionalProperties: false },
);
/** What a worker says about itself on every heartbeat (seed 000's payload, plus its leases). */
export type WorkerBeat = Static<typeof WorkerBeatSchema>;

/** A graceful shutdown's body (optional: without it the shutdown is of whichever run is current). */
export const WorkerShutdownSchema = Type.Object(
  {
    /**
     * The run shutting down (the runId of its beats). A shutdown of a run that is no longer the
     * worker's current one (another registered under the id since: the shutdown landed late, held up
     * or sent again) changes nothing of the worker and gives back none of the tasks leased under its id,
     * which are the new run's.
     */
    runId: Type.Optional(
      RunId(
        "the run shutting down (the run_id of its beats): if another run has registered under the id since (this shutdown arrived late, held up or sent again), nothing changes and nothing is released; without it, the shutdown is of whichever run is current",
      ),
    ),
  },
  { additionalProperties: false },
);

export const SweepOptionsSchema = Type.Object(
  {
    staleAfterSeconds: Seconds,
    deadAfterSeconds: Seconds,
    /** How long a reassigned task stays reserved for the worker chosen for it. */
    reservationSeconds: Seconds,
    /**
     * Per task type; wins over the registry. A type not listed uses the recovery policy of the registered
     * version its task was created under, and `retry` if it was created unregistered.
     */
    recoveryPolicies: Type.Optional(Type.Record(Type.String({ pattern: TASK_TYPE_PATTERN }), OneOf(RECOVERY_POLICIES))),
  },
  { additionalProperties: false },
);
/** Thresholds of one sweep (see coordinator/). */
export type SweepOptions = Static<typeof SweepOptionsSchema>;

export const LeadershipSchema = Type.Object({ name: Type.String({ pattern: "^[a-z_]{1,64}$" }), holder: Text({ minLength: 1, maxLength: 255 }), ttlSeconds: Seconds });

/** What an operator chooses about a new API key (the key itself is generated, see core/api-key.ts). */
export const ApiKeyOptionsSchema = Type.Object(
  {
    scope: OneOf(API_KEY_SCOPES),
    /** A label for operators ("ci", "crawler fleet"). */
    name: Type.Optional(Text({ minLength: 1, maxLength: 100 })),
    /** Requests per minute this key may make; omitted = the server's default. */
    rateLimitPerMinute: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
  },
  { additionalProperties: false },
);
export type ApiKeyOptions = Static<typeof ApiKeyOptionsSchema>;

export const ApiKeyId = Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: "an API key id" });
export const ApiKeyHash = Type.String({ pattern: "^[0-9a-f]{64}$", description: "the SHA-256 of a key, in lower-case hex" });

/** A key as a store receives it: its options, its hash and its shown prefix, never the key. */
export const NewApiKeySchema = Type.Object(
  { ...ApiKeyOptionsSchema.properties, keyHash: ApiKeyHash, prefix: Type.String({ pattern: "^tp_[A-Za-z0-9_-]{1,16}$" }) },
  { additionalProperties: false },
);
export type NewApiKey = Static<typeof NewApiKeySchema>;

export const ScheduleName = Type.String({ pattern: TASK_TYPE_PATTERN, description: "a letter, then letters, digits, _ . : - (128 at most), e.g. nightly_resync" });

/** One key of a fan-out: it becomes one task, whose params get `{ key }`. */
const FanOutKey = Type.Union([Text({ minLength: 1, maxLength: 255 }), Type.Integer({ minimum: Number.MIN_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER })], {
  description: "a string or an integer",
});

export const FanOutSchema = Type.Object(
  {
    /** One task per key. Give `keys` or `fromResults`, not both. */
    keys: Type.Optional(Type.Array(FanOutKey, { minItems: 1, maxItems: 10_000, uniqueItems: true })),
    /** One task per key found in the results of the latest run (of this schedule, or of `schedule`) with completed tasks. */
    fromResults: Type.Optional(
      Type.Object(
        {
          schedule: Type.Optional(ScheduleName),
          /** The result field holding the keys (a list or one key), e.g. `newStoreIds`; dots reach into objects. */
          field: Text({ minLength: 1, maxLength: 255 }),
        },
        { additionalProperties: false },
      ),
    ),
    /** Staggered batches (default 1): seed 004 resyncs in 6 batches, one every 4 hours. */
    batches: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    /** Between two batches; default for a schedule: the time to its next tick divided by `batches`. */
    batchIntervalSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 366 * 86400 })),
  },
  { additionalProperties: false },
);
/** How a schedule's run (or a generation) spreads one task per key over staggered batches. */
export type FanOut = Static<typeof FanOutSchema>;

/** `{key}` in a concurrency key template is replaced by each fan-out key: "store:{key}". */
const ConcurrencyKeyTemplate = Text({ minLength: 1, maxLength: MAX_KEY_LENGTH, description: "a concurrency key; {key} stands for the fan-out key, e.g. store:{key}" });
/** The same for unique keys: a task is not made while one of its key is pending ("resync:{key}"). */
const UniqueKeyTemplate = Text({ minLength: 1, maxLength: MAX_KEY_LENGTH, description: "a unique key; {key} stands for the fan-out key, e.g. resync:{key}: no task is made while one of the same key is pending" });

export const ScheduleDefinitionSchema = Type.Object(
  {
    name: ScheduleName,
    taskType: TaskTypeName,
    params: Type.Optional(JsonObjectValue),
    cron: Text({ minLength: 1, maxLength: 255, description: "a cron expression: 5 fields (minute hour day month weekday) or 6 with seconds first, e.g. 0 */4 * * *" }),
    /** IANA time zone the cron expression is read in (default UTC). */
    timezone: Type.Optional(Text({ minLength: 1, maxLength: 64, description: "an IANA time zone, e.g. Europe/Paris" })),
    /** Default true for a new schedule; left out of an update, the schedule stays paused or running as it is. */
    enabled: Type.Optional(Type.Boolean()),
    fanOut: Type.Optional(FanOutSchema),
    concurrencyKey: Type.Optional(ConcurrencyKeyTemplate),
    /** A run makes no task of a key whose previous task is still pending (workers behind: no pile of duplicates). */
    uniqueKey: Type.Optional(UniqueKeyTemplate),
    priority: Type.Optional(Priority),
    /** When the coordinator was down across ticks: `skip` them (default) or `run_once` now. */
    missedTicks: Type.Optional(OneOf(MISSED_TICK_POLICIES)),
  },
  { additionalProperties: false },
);
/** A recurring schedule as a producer defines it (pool.schedule): created, or updated by name. */
export type ScheduleDefinition = Static<typeof ScheduleDefinitionSchema>;

export const FireOptionsSchema = Type.Object(
  {
    /** A tick older than this when it is found was missed (the coordinator was down): see `missedTicks`. */
    graceSeconds: Type.Number({ minimum: 0, maximum: 7 * 86400 }),
  },
  { additionalProperties: false },
);
export type FireOptions = Static<typeof FireOptionsSchema>;

export const GenerateInputSchema = Type.Object(
  {
    taskType: TaskTypeName,
    params: Type.Optional(JsonObjectValue),
    /** Omitted: one task. */
    fanOut: Type.Optional(FanOutSchema),
    concurrencyKey: Type.Optional(ConcurrencyKeyTemplate),
    uniqueKey: Type.Optional(UniqueKeyTemplate),
    priority: Type.Optional(Priority),
    /** When the first batch is due (default now). */
    startAt: Type.Optional(StorableDate),
  },
  { additionalProperties: false },
);
/** Tasks made now from a fan-out, as one schedule run would make them (pool.generate). */
export type GenerateInput = Static<typeof GenerateInputSchema>;

const DAY_PATTERN = "^\\d{4}-\\d{2}-\\d{2}$";

export const ResyncInputSchema = Type.Object(
  {
    /** Default product_resync. */
    taskType: Type.Optional(TaskTypeName),
    keys: FanOutSchema.properties.keys,
    fromResults: FanOutSchema.properties.fromResults,
    /** Default 6, spread over 24 hours: one every 4 hours (seed 004). */
    batches: Type.Optional(Type.Integer({ minimum: 1, maximum: 96 })),
    /** The day whose batches to make, from its midnight UTC; omitted: starting now. */
    date: Type.Optional(Type.String({ pattern: DAY_PATTERN, description: "a day as YYYY-MM-DD" })),
    params: Type.Optional(JsonObjectValue),
    /** Default store:{key}: one active resync per store. */
    concurrencyKey: Type.Optional(ConcurrencyKeyTemplate),
    uniqueKey: Type.Optional(UniqueKeyTemplate),
    priority: Type.Optional(Priority),
  },
  { additionalProperties: false },
);
/** Seed 004's daily resync generation: its keys (stores) over N batches of the day. */
export type ResyncInput = Static<typeof ResyncInputSchema>;

export const DiscoveryInputSchema = Type.Object(
  {
    /** Default store_discovery. */
    taskType: Type.Optional(TaskTypeName),
    params: Type.Optional(JsonObjectValue),
    /** One task per key (e.g. per region); omitted: one task. */
    keys: FanOutSchema.properties.keys,
    priority: Type.Optional(Priority),
  },
  { additionalProperties: false },
);
/** Seed 004's discovery generation: one store_discovery task, or one per key. */
export type DiscoveryInput = Static<typeof DiscoveryInputSchema>;
