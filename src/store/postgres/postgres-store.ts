import pg from "pg";
import type { Clock } from "../../core/clock.js";
import type { ApiKeyRecord } from "../../core/api-key.js";
import { AlreadyClaimedError, ApiKeyNotFoundError, ConcurrencyKeyBusyError, ScheduleNotFoundError, TaskTypeAtCapacityError, UniqueKeyTakenError, ValidationError, WorkerNotFoundError } from "../../core/errors.js";
import { omittedCheckpoint, type TaskEvent } from "../../core/event.js";
import { type NewTask, type NewTaskRules, prepareNewTask, prepareNewTasks } from "../../core/new-task.js";
import { ParamsValidators } from "../../core/params-schema.js";
import type { TaskAction } from "../../core/state-machine.js";
import {
  type ClaimedTask,
  type ClaimOptions,
  type CompleteOptions,
  DEFAULT_LEASE_SECONDS,
  type EnqueueInput,
  type FailOptions,
  type Json,
  type Lease,
  type Page,
  type Task,
  type TaskCounts,
  type TaskFilter,
  type TaskPage,
} from "../../core/task.js";
import { resolveTaskType, sameDefinition, type TaskTypeDefinition, type TaskTypeRecord } from "../../core/task-type.js";
import { type CancelOptions, type RetryOptions, type ClaimByIdOptions, type Completion, type EnqueueCallOptions, type EventsQuery, type Failure, type HeartbeatOptions, type NewApiKey, type ReassignmentQuery, type ReleaseOptions, type ThroughputQuery, type FailuresQuery, WORKER_BEAT_DEFAULTS } from "../../core/schemas.js";
import { type ReassignmentEvent, secondsToRecovery, type SweepOptions, type SweepResult, UNKNOWN_TO_ITS_WORKER, type WorkerBeat, type WorkerBeatResult, type WorkerList, type WorkerQuery, type WorkerStatus } from "../../core/worker.js";
import { type ApiKeyRow, toApiKey } from "../api-key-records.js";
import { type ClaimGroup, ClaimMemory, claimShape, FRUITLESS_ROUND_MS, groupClaims, KEY_ROUNDS, resolveClaim, shareOut } from "../claim-options.js";
import { matchEnqueueResults, skippedKeys } from "../enqueue-results.js";
import { type IdempotencyRecord, replayResults, requestFingerprint } from "../idempotency.js";
import { recountResult, tallyCounts } from "../counts.js";
import { pageOf, resolveList } from "../paging.js";
import { refusalError, type LeaseRow } from "../refusal.js";
import type { BatchOptions, BatchOutcome, CompleteResult, EnqueueCall, EnqueueCallOutcome, EnqueueResult, LeadershipStatus, RegisterTaskTypeResult, SqlConnection, Store } from "../store.js";
import { callerConnection, type CallerStatements, type InsertTarget } from "./caller-connection.js";
import { toTaskType, type TaskTypeRow } from "../task-type-records.js";
import type { CapacityRow, Failures, ReassignmentStats, Throughput } from "../../core/monitoring.js";
import {
  type CapacityViewRow,
  type ReassignmentViewRows,
  type ThroughputGroupRow,
  type FailureGroupRow,
  failuresParams,
  toFailures,
  throughputKeptSince,
  throughputWindow,
  toCapacity,
  toReassignmentRate,
  toReassignmentStats,
  toThroughput,
  VIEW_READS,
} from "../monitoring-records.js";
import { PgListener } from "./listener.js";
import { migratePostgres } from "./migrate.js";
import { prunePostgres } from "./postgres-retention.js";
import type { PruneOptions, PruneResult } from "../../core/retention.js";
import type { RecountOptions, RecountResult } from "../../core/recount.js";
import { sweepPostgres } from "./postgres-sweep.js";
import { DatabaseClock } from "./database-clock.js";
import { checkedMs, MAX_TIMER_MS } from "../../core/milliseconds.js";
import { connectionSettings } from "./session-settings.js";
import { clientTimeoutMs, connectTimeoutMs, DEFAULT_STATEMENT_TIMEOUT_MS, LIFT_STATEMENT_TIMEOUT, STATEMENT_TIMEOUT_RANGE, UNTIMED } from "./timeouts.js";
import { inTransaction, isDeadlock, retriedOnDeadlock } from "./transaction.js";
import { ReadGate } from "./read-gate.js";
import * as keySql from "./key-queries.js";
import * as sql from "./queries.js";
import { type LeadershipRow, type ReassignmentRow, toLeadershipStatus, toReassignment, toWorker, type WorkerRow } from "../worker-records.js";
import { type ClaimedRow, type EventRow, newTasksJson, type TaskRow, toClaimedTask, toEvent, toTask } from "./rows.js";
import * as typeSql from "./task-type-queries.js";
import * as monitoringSql from "./monitoring-queries.js";
import * as workerSql from "./worker-queries.js";
import { resolveWorkerList, workerCounts, workerPageOf } from "../worker-paging.js";
import * as scheduleSql from "./schedule-queries.js";
import { parseTimestamptz } from "./timestamptz.js";
import { checkScheduleTasks, nextRunWhen, noResultsSchedule, resolveSchedule, resultsScheduleOf, scheduleCancelled, type FiredSchedule, type FireOptions, type GenerateInput, type GenerateResult, type SaveScheduleResult, type ScheduleDefinition, type ScheduleRecord } from "../../core/schedule.js";
import { type ScheduleRow, storedRunResult, toSchedule } from "../schedule-records.js";
import { fireDueSchedules as fireSchedules, generateTasks, type PassWrite, type RunWrite, type ScheduleWriter } from "../schedule-passes.js";
import { DEFAULT_SCHEMA } from "../open-store.js";

export interface PostgresStoreOptions {
  /** postgres://user:password@host:port/database */
  url: string;
  /** Schema holding taskpool's tables (default "taskpool"); created by migrate(). */
  schema?: string;
  /**
   * Where "now" comes from. Default: the database server's clock (see DatabaseClock), as every
   * process sharing the database must agree on the time; another clock is for tests and simulations.
   */
  clock?: Clock;
  /** Jitter source for retry backoff, in [0, 1). */
  random?: () => number;
  /** Connections in the pool (default 10). */
  poolSize?: number;
  /** Refuse tasks of unregistered types (see prepareNewTask). */
  requireRegistered?: boolean;
  /** Whether migrate() may set up a schema that holds no taskpool tables (default true; see migratePostgres). */
  create?: boolean;
  /**
   * How long PostgreSQL runs one statement before cancelling it (default 10000; 100 to 3,600,000).
   * On a connection gone silent the client gives up a second later. Migrations and recount are not limited.
   */
  statementTimeoutMs?: number;
  /**
   * The operator reads that can be slow (listing and searching tasks, counts, statistics, reassignments,
   * capacity): how many run at once, each on one of the pool's connections (default: a fifth of
   * poolSize, at least 1; 2 of 10), and how long another waits for its turn before it is refused as
   * database_unavailable (default: as long as any call waits for a free connection, 11 s at most).
   * Claims, heartbeats and completions keep the rest of the pool (see ReadGate).
   */
  operatorReads?: { concurrency?: number; waitMs?: number };
}

/**
 * A plain lower-case identifier, 54 characters at most: the schema's NOTIFY channel, taskpool_<schema>,
 * must fit PostgreSQL's 63. A longer one was migrated, and then every enqueue failed ("channel name
 * too long").
 */
const SCHEMA_PATTERN = /^[a-z_][a-z0-9_]{0,53}$/;
const UNIQUE_VIOLATION = "23505";
const CLAIM_RETRIES = 5;
/** How long claims that met a capped type go straight to the full claim statement (see claimOnce). */
const CAPPED_MEMORY_MS = 10_000;
/** A claimed row: claim_owner is the claiming worker's 1-based position in its group. */
type ClaimRow = ClaimedRow & { claim_owner: string; cut: boolean };
const typeNames = (inputs: EnqueueInput[]) => [...new Set(inputs.map((i) => i.taskType))];

/** Task type names an enqueue remembers the latest version of (see insertPrepared). */
const KNOWN_TYPES_MAX = 1000;

/**
 * pg returns int8 (ids, counts) as strings to be safe past 2^53; taskpool ids stay far below that.
 * Timestamps are read by position (see parseTimestamptz).
 */
const types = {
  getTypeParser: ((oid: number, format?: string) => {
    if (oid === pg.types.builtins.INT8) return Number;
    if (oid === pg.types.builtins.TIMESTAMPTZ && format !== "binary") return parseTimestamptz;
    return pg.types.getTypeParser(oid, format as "text");
  }) as typeof pg.types.getTypeParser,
};

/** A run's pass found its schedule changed since it was read: the run's writes are rolled back. */
class RunOvertaken extends Error {}

/** The PostgreSQL store: many processes on many machines share one database. */
/** A statement by name on some connection: the pool's, or one a transaction holds. */
type Query = <R>(name: string, text: string, values: unknown[]) => Promise<R[]>;

export class PostgresStore implements Store {
  readonly dialect = "postgres";
  readonly schema: string;
  private readonly create: boolean;
  readonly pool: pg.Pool;
  /** NOTIFY channel of this schema: stores on other schemas do not wake each other. */
  readonly channel: string;
  private readonly clock: Clock;
  /** The default clock, to be read before it is used (see now()); null when the options gave one. */
  private readonly databaseClock: DatabaseClock | null;
  private readonly random: () => number;
  private readonly listener: PgListener;
  /** Operator reads that can be slow go through it: they never hold more than a few of the pool's connections. */
  private readonly reads: ReadGate;
  private readonly rules: NewTaskRules;
  /** The latest version of each task type this store read (null: none registered); see insertPrepared. */
  private readonly knownTypes = new Map<string, TaskTypeRecord | null>();
  /** Claims (shape and task types) that met a capped type, until when they skip the lean claim (see claimOnce). */
  private readonly cappedClaims = new ClaimMemory(CAPPED_MEMORY_MS);
  /** Claims whose running again past concurrency keys found nothing, until when they do not (see claimMany). */
  private readonly fruitlessRounds = new ClaimMemory(FRUITLESS_ROUND_MS);

  constructor(options: PostgresStoreOptions) {
    this.schema = options.schema ?? DEFAULT_SCHEMA;
    this.create = options.create ?? true;
    if (!SCHEMA_PATTERN.test(this.schema)) {
      throw new ValidationError(`Invalid schema name "${this.schema}": use lower-case letters, digits and _, 54 at most, starting with a letter or _`, [
        { path: "schema", message: "not a plain identifier of 54 characters at most" },
      ]);
    }
    this.random = options.random ?? Math.random;
    this.rules = { validators: new ParamsValidators(), requireRegistered: options.requireRegistered ?? false };
    const { min, max } = STATEMENT_TIMEOUT_RANGE;
    const statementTimeoutMs = checkedMs("statementTimeoutMs", options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS, min, max);
    const connection = connectionSettings(options.url, this.schema, statementTimeoutMs);
    const poolSize = options.poolSize ?? 10;
    this.reads = readGate(options.operatorReads, poolSize, connectTimeoutMs(statementTimeoutMs));
    this.pool = new pg.Pool({
      connectionString: connection.url,
      max: poolSize,
      options: connection.options,
      // Keep connections (and their prepared statements) across a coordinator's 60 s sweeps.
      idleTimeoutMillis: 300_000,
      // Opening a connection (or waiting for a free one) is bounded like a call: a server address
      // that swallows packets (a failover that left the old address dead, a host that accepts and
      // never answers) otherwise held every call, and readiness checks, until the kernel gave up
      // (minutes) or for good.
      connectionTimeoutMillis: connectTimeoutMs(statementTimeoutMs),
      query_timeout: clientTimeoutMs(statementTimeoutMs),
      allowExitOnIdle: true,
      types,
    });
    // A client losing its connection must not crash the process; the next query reconnects. The pool
    // hears idle clients; a client checked out for a transaction would emit its 'error' to nobody
    // when the connection drops between two statements (a restart, pg_terminate_backend), and an
    // unheard 'error' kills the process: every client gets a listener of its own, and the
    // transaction's next statement fails instead.
    this.pool.on("error", () => {});
    this.pool.on("connect", (client) => client.on("error", () => {}));
    this.databaseClock = options.clock === undefined ? new DatabaseClock(this.pool) : null;
    this.clock = options.clock ?? (this.databaseClock as DatabaseClock);
    this.channel = `taskpool_${this.schema}`;
    this.listener = new PgListener(options.url, this.channel);
  }

  migrate(): Promise<number[]> {
    return migratePostgres(this.pool, this.schema, this.create);
  }

  async close(): Promise<void> {
    await this.listener.close();
    await this.pool.end();
  }

  /** The store's time now: every statement's "now" (see DatabaseClock). */
  private async now(): Promise<Date> {
    await this.databaseClock?.ready();
    return this.clock.now();
  }

  private async rows<R>(name: string, text: string, values: unknown[]): Promise<R[]> {
    const result = await this.pool.query({ name, text, values });
    return result.rows as R[];
  }

  /** rows(), for an operator read that can be slow: it waits its turn at the gate (see ReadGate). */
  private operatorRows<R>(name: string, text: string, values: unknown[]): Promise<R[]> {
    return this.reads.run(() => this.rows<R>(name, text, values));
  }

  async enqueue(input: EnqueueInput, options: EnqueueCallOptions = {}): Promise<EnqueueResult> {
    const now = await this.now();
    const prepare = (types: ReadonlyMap<string, TaskTypeRecord>) => [prepareNewTask(input, now, types.get(input.taskType), this.rules)];
    const [result] = await this.insertKeyed("one", [input], prepare, options.idempotencyKey, now);
    return result;
  }

  async enqueueMany(inputs: EnqueueInput[], options: EnqueueCallOptions = {}): Promise<EnqueueResult[]> {
    if (inputs.length === 0) return [];
    const now = await this.now();
    return this.insertKeyed("many", inputs, (types) => prepareNewTasks(inputs, now, types, this.rules), options.idempotencyKey, now);
  }

  /**
   * insertPrepared, with an idempotency key in a transaction of its own (see idempotency.ts): the key
   * is taken first (a racing call with the same key waits on it), the tasks inserted, their ids
   * recorded, and all of it commits at once. Without a key: the plain one-statement enqueue.
   */
  private async insertKeyed(
    kind: "one" | "many",
    inputs: EnqueueInput[],
    prepare: (types: ReadonlyMap<string, TaskTypeRecord>) => NewTask[],
    key: string | undefined,
    now: Date,
  ): Promise<EnqueueResult[]> {
    if (key === undefined) return this.insertPrepared(inputs, prepare, this.ownConnections);
    const fingerprint = requestFingerprint(kind, inputs);
    const written = await retriedOnDeadlock(() =>
      this.transaction(async (query) => {
        const taken = await query("tp_take_idempotency_keys", sql.TAKE_IDEMPOTENCY_KEYS, [[key], [fingerprint], now]);
        if (taken.length === 0) return null;
        const results = await this.insertPrepared(inputs, prepare, this.targetOn(query), query);
        await query("tp_record_idempotency_key_tasks", sql.RECORD_IDEMPOTENCY_KEY_TASKS, [key, results.map((r) => r.task.id)]);
        return results;
      }),
    );
    if (written) return written;
    const { records, tasks } = await this.keyRecords([key]);
    const record = records.get(key);
    // Gone since it was found taken (retention pruned a day-old key): the call is made afresh.
    if (!record) return this.insertKeyed(kind, inputs, prepare, key, now);
    return replayResults(key, fingerprint, record, tasks);
  }

  /** What the calls that used `keys` recorded, and those calls' tasks, read after the commit that found the keys taken. */
  private async keyRecords(keys: string[]): Promise<{ records: Map<string, IdempotencyRecord>; tasks: Task[] }> {
    // pg reads a bigint[] as strings (the store's parser is for a single int8).
    const rows = await this.rows<{ key: string; fingerprint: string; task_ids: string[] }>("tp_idempotency_keys", sql.IDEMPOTENCY_KEYS, [keys]);
    const tasks = (await this.rows<TaskRow>("tp_tasks_by_ids", sql.TASKS_BY_IDS, [rows.flatMap((r) => r.task_ids)])).map(toTask);
    return { records: new Map(rows.map((r) => [r.key, { fingerprint: r.fingerprint, taskIds: r.task_ids.map(Number) }])), tasks };
  }

  /** `work` in a transaction on one of the pool's connections, which `query` runs statements on; rolled back on any error. */
  private transaction<T>(work: (query: Query) => Promise<T>): Promise<T> {
    return inTransaction(this.pool, (client) => work(async (name, text, values) => (await client.query({ name, text, values })).rows));
  }

  /**
   * Concurrent single calls, keyed or not, in one transaction (see Store.enqueueCalls): their keys
   * taken in one statement, the tasks of the calls whose keys were new (and of the unkeyed ones)
   * inserted in one, their ids recorded in one. A keyed call costs the batch's round trips, not four
   * of its own: one by one, a server took about a quarter as many keyed creates a second as unkeyed
   * (batched) ones; batched, about half (bench:http-enqueue). The calls whose keys were used before
   * are answered after the commit, as a single call's would be.
   */
  async enqueueCalls(calls: EnqueueCall[]): Promise<EnqueueCallOutcome[]> {
    const now = await this.now();
    const keys = calls.flatMap((c) => (c.idempotencyKey === undefined ? [] : [c.idempotencyKey]));
    const fingerprints = calls.flatMap((c) => (c.idempotencyKey === undefined ? [] : [requestFingerprint("one", [c.input])]));
    // Filled once the commit is made: a transaction ended by a deadlock is made again, and its first answers were never written.
    const written = new Map<EnqueueCall, EnqueueResult>(
      await retriedOnDeadlock(() =>
        this.transaction(async (query) => {
          const taken = new Set((await query<{ key: string }>("tp_take_idempotency_keys", sql.TAKE_IDEMPOTENCY_KEYS, [keys, fingerprints, now])).map((r) => r.key));
          const fresh = calls.filter((c) => c.idempotencyKey === undefined || taken.has(c.idempotencyKey));
          const inputs = fresh.map((c) => c.input);
          const results = inputs.length === 0 ? [] : await this.insertPrepared(inputs, (types) => prepareNewTasks(inputs, now, types, this.rules), this.targetOn(query), query);
          const recorded = fresh.flatMap((c, i) => (c.idempotencyKey === undefined ? [] : [{ key: c.idempotencyKey, id: results[i].task.id }]));
          if (recorded.length > 0) {
            await query("tp_record_idempotency_keys_task", sql.RECORD_IDEMPOTENCY_KEYS_TASK, [recorded.map((r) => r.key), recorded.map((r) => r.id)]);
          }
          return fresh.map((call, i) => [call, results[i]] as const);
        }),
      ),
    );
    const unwritten = calls.filter((c) => !written.has(c));
    // The others' tasks committed: a failed read reaches only the calls it was for, which may be sent again.
    const replays = await this.replays(unwritten).catch((error: Error) => new Map(unwritten.map((c) => [c, { ok: false as const, error }])));
    return calls.map((c) => {
      const result = written.get(c);
      return result ? { ok: true, value: result } : replays.get(c)!;
    });
  }

  /** The answers to keyed single calls whose keys earlier calls used (see replayResults). */
  private async replays(calls: EnqueueCall[]): Promise<Map<EnqueueCall, EnqueueCallOutcome>> {
    const answers = new Map<EnqueueCall, EnqueueCallOutcome>();
    if (calls.length === 0) return answers;
    const { records, tasks } = await this.keyRecords(calls.map((c) => c.idempotencyKey!));
    for (const call of calls) {
      const key = call.idempotencyKey!;
      const record = records.get(key);
      try {
        // Gone since it was found taken (retention pruned a day-old key): the call is made afresh.
        const [value] = record
          ? replayResults(key, requestFingerprint("one", [call.input]), record, tasks)
          : [await this.enqueue(call.input, { idempotencyKey: key })];
        answers.set(call, { ok: true, value });
      } catch (error) {
        answers.set(call, { ok: false, error: error as Error });
      }
    }
    return answers;
  }

  /**
   * enqueueMany on the caller's connection, in whatever transaction the caller has open there: the
   * tasks commit with the caller's own writes (and workers hear of them then) or vanish with a
   * rollback. Task types are read on the store's own connections, as every enqueue reads them.
   */
  async enqueueWithin(connection: SqlConnection, inputs: EnqueueInput[]): Promise<EnqueueResult[]> {
    if (inputs.length === 0) return [];
    const now = await this.now();
    // A single task is prepared as enqueue prepares it: its errors name no index.
    const prepare = (types: ReadonlyMap<string, TaskTypeRecord>) =>
      inputs.length === 1 ? [prepareNewTask(inputs[0], now, types.get(inputs[0].taskType), this.rules)] : prepareNewTasks(inputs, now, types, this.rules);
    this.callerStatements ??= sql.enqueueStatements(this.schema);
    return this.insertPrepared(inputs, prepare, callerConnection(connection, this.callerStatements));
  }

  /** The enqueue's statements for callers' connections (see enqueueWithin), named with the schema. */
  private callerStatements: CallerStatements | null = null;

  /** The enqueue's statements on the store's pool: named (prepared once per connection), rows parsed by the store's types. */
  private readonly ownConnections: InsertTarget = this.targetOn((name, text, values) => retriedOnDeadlock(() => this.rows(name, text, values)));

  /** The enqueue's statements run by `query`: on the pool, or on a keyed call's transaction. */
  private targetOn(query: Query): InsertTarget {
    return {
      insert: async (values, checked) => {
        const rows = checked
          ? await query<TaskRow & { types_current: boolean }>("tp_enqueue_if_current", sql.ENQUEUE_IF_CURRENT, values)
          : await query<TaskRow & { types_current?: undefined }>("tp_enqueue", sql.ENQUEUE, values);
        if (checked && !rows[0].types_current) return null;
        return rows.filter((row) => row.id !== null).map(toTask);
      },
      holders: async (keys) => (await query<TaskRow>("tp_pending_by_unique_keys", sql.PENDING_BY_UNIQUE_KEYS, [keys])).map(toTask),
    };
  }

  /**
   * Tasks are prepared (defaults filled in, params checked) against their types' latest registered
   * versions, and a version registered by another process applies at once. One round trip in the
   * usual case: they are prepared against the versions this store read last, and the insert writes
   * them only if those are still the latest (ENQUEUE_IF_CURRENT); if not, it writes nothing and the
   * types are read afresh. A refusal is only ever decided on a fresh read.
   */
  private async insertPrepared(
    inputs: EnqueueInput[],
    prepare: (types: ReadonlyMap<string, TaskTypeRecord>) => NewTask[],
    target: InsertTarget,
    query: Query = (name, text, values) => this.rows(name, text, values),
  ): Promise<EnqueueResult[]> {
    const names = typeNames(inputs);
    for (let fresh = !names.every((name) => this.knownTypes.has(name)); ; fresh = true) {
      const types = fresh ? await this.latestTypes(names, query) : this.knownTypesOf(names);
      let prepared: NewTask[];
      try {
        prepared = prepare(types);
      } catch (error) {
        if (fresh) throw error;
        continue;
      }
      const results = await this.insert(prepared, true, target);
      if (results !== null) return results;
    }
  }

  /**
   * The latest registered version of each type, read afresh (by `query`: a transaction holding one of
   * the pool's connections reads on it, as waiting for another could wait for ever once every
   * connection is held so), and remembered for the next enqueue.
   */
  private async latestTypes(names: string[], query: Query = (name, text, values) => this.rows(name, text, values)): Promise<Map<string, TaskTypeRecord>> {
    const rows = await query<TaskTypeRow>("tp_latest_task_types", typeSql.LATEST_TASK_TYPES, [names]);
    const types = new Map(rows.map((r) => [r.name, toTaskType(r)]));
    // Type names come from producers: forget them all rather than grow without bound.
    if (this.knownTypes.size + names.length > KNOWN_TYPES_MAX) this.knownTypes.clear();
    for (const name of names) this.knownTypes.set(name, types.get(name) ?? null);
    return types;
  }

  private knownTypesOf(names: string[]): Map<string, TaskTypeRecord> {
    const types = new Map<string, TaskTypeRecord>();
    for (const name of names) {
      const type = this.knownTypes.get(name);
      if (type) types.set(name, type);
    }
    return types;
  }

  /** Null when `checked` and a type has a newer version than the one a task was prepared against: nothing was written. */
  private async insert(prepared: NewTask[], checked: boolean, target: InsertTarget): Promise<EnqueueResult[] | null> {
    const inserted = await target.insert([newTasksJson(prepared), await this.now(), this.channel], checked);
    if (inserted === null) return null;
    const keys = skippedKeys(prepared, inserted);
    const holders = new Map<string, Task>();
    if (keys.length > 0) for (const task of await target.holders(keys)) holders.set(task.uniqueKey as string, task);
    const matched = matchEnqueueResults(prepared, inserted, holders);
    // A holder claimed between the insert and the lookup frees its key: enqueue those items again.
    const retry = prepared.filter((_, i) => matched[i] === null);
    if (retry.length === 0) return matched as EnqueueResult[];
    // The same call going on: its tasks were prepared against the versions that were current then.
    const again = (await this.insert(retry, false, target)) as EnqueueResult[];
    return matched.map((m) => m ?? (again.shift() as EnqueueResult));
  }

  async claim(options: ClaimOptions): Promise<ClaimedTask[]> {
    return (await this.claimMany([options]))[0];
  }

  async claimMany(claims: ClaimOptions[]): Promise<ClaimedTask[][]> {
    const resolved = claims.map(resolveClaim);
    const answers: ClaimedTask[][] = resolved.map(() => []);
    for (const group of groupClaims(resolved)) {
      const byWorker: ClaimedTask[][] = group.workers.map(() => []);
      // Workers with room left (their 1-based positions in the group); a round cut short by concurrency
      // keys (see CUT in queries.ts) is run again for them, each round taking at least one task, unless
      // running again found nothing a moment ago (FRUITLESS_ROUND_MS). The shape is worked out once a claim
      // is cut short, not for every claim.
      let shape: string | null = null;
      let short = group.workers.map((_, i) => i);
      for (let round = 1; short.length > 0; round++) {
        const workers = short.map((i) => ({ ...group.workers[i], limit: group.workers[i].limit - byWorker[i].length }));
        const writes = { now: await this.now(), leaseSeconds: group.shape.leaseSeconds, start: group.shape.start };
        const rows = await this.claimGroup({ shape: group.shape, workers }, writes.now);
        for (const row of rows) byWorker[short[Number(row.claim_owner) - 1]].push(toClaimedTask(row, writes));
        if (shape !== null && rows.length === 0) this.fruitlessRounds.remember(shape);
        if (!rows[0]?.cut || round === KEY_ROUNDS) break;
        shape ??= claimShape(group.shape);
        if (this.fruitlessRounds.holds(shape)) break;
        short = short.filter((i) => byWorker[i].length < group.workers[i].limit);
      }
      group.workers.forEach((worker, i) => shareOut(byWorker[i], worker.members, resolved, answers));
    }
    return answers;
  }

  private async claimGroup({ shape: c, workers }: ClaimGroup, now: Date): Promise<ClaimRow[]> {
    const typed = c.taskTypes !== null;
    const limits = workers.map((w) => w.limit);
    const values: unknown[] = [workers.map((w) => w.workerId), now, limits.reduce((a, b) => a + b, 0), c.leaseSeconds, c.maxAttemptsRemaining, limits];
    if (typed) values.push(c.taskTypes);
    const shape = `${c.sortBy}_${c.sortOrder}_${typed ? "typed" : "any"}${c.start ? "_start" : ""}`;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.claimOnce(shape, c, typed, workers.length === 1, values);
      } catch (error) {
        // Lost a race for a concurrency key (see claimStatement); the retry sees the winner and skips the key.
        // Taking several keys, it can instead wait on a writer that waits on it: PostgreSQL ends one of the two.
        if (!isUniqueViolation(error, "tasks_active_concurrency_key") && !isDeadlock(error)) throw error;
        // Losing every time means others are taking the work as fast as it frees: these claims get none now.
        if (attempt >= CLAIM_RETRIES) return [];
      }
    }
  }

  /**
   * The lean claim, or the full one when the lean one finds a capped type in scope or a reservation
   * for one of the workers (see leanClaimStatement). Claims that met a capped type (same shape, same
   * types) go straight to the full statement for a while, rather than paying for both every time;
   * either statement is correct.
   */
  private async claimOnce(shape: string, c: ClaimGroup["shape"], typed: boolean, single: boolean, values: unknown[]): Promise<ClaimRow[]> {
    const full = () => this.rows<ClaimRow>(`tp_claim_${shape}`, sql.claimStatement(c.sortBy, c.sortOrder, typed, c.start), values);
    const memo = `${shape}:${c.taskTypes === null ? "" : JSON.stringify([...c.taskTypes].sort())}`;
    if (this.cappedClaims.holds(memo)) return full();
    const name = `tp_claim_lean_${shape}${single ? "_single" : ""}`;
    const rows = await this.rows<ClaimRow & { blocked: "capped" | "reserved" | null }>(name, sql.leanClaimStatement(c.sortBy, c.sortOrder, typed, c.start, single), values);
    const blocked = rows[0]?.blocked ?? null;
    if (blocked === null) return rows.filter((row) => row.id !== null);
    if (blocked === "capped") this.cappedClaims.remember(memo);
    return full();
  }

  async claimById(id: number, options: ClaimByIdOptions): Promise<ClaimedTask> {
    const leaseSeconds = options.leaseSeconds ?? DEFAULT_LEASE_SECONDS;
    let rows: TaskRow[];
    try {
      rows = await this.rows<TaskRow>("tp_claim_by_id", sql.CLAIM_BY_ID, [id, options.workerId, await this.now(), leaseSeconds]);
    } catch (error) {
      if (!isUniqueViolation(error, "tasks_active_concurrency_key")) throw error;
      const [state] = await this.rows<LeaseRow & { concurrency_key: string }>("tp_lease_state", sql.LEASE_STATE, [id]);
      throw new ConcurrencyKeyBusyError(id, state.concurrency_key);
    }
    if (rows.length > 0) return toTask(rows[0]) as ClaimedTask;
    const [state] = await this.rows<LeaseRow & { task_type: string }>("tp_lease_state", sql.LEASE_STATE, [id]);
    if (state && (state.status === "claimed" || state.status === "running")) throw new AlreadyClaimedError(id, state.worker_id, options.workerId);
    // Still pending, yet not claimed: the statement found its type at the cap.
    if (state?.status === "pending") throw new TaskTypeAtCapacityError(id, state.task_type);
    throw refusalError(id, state, "claim");
  }

  /** Runs a lease-guarded statement; on zero rows, explains why with a typed error. */
  private async guarded(action: TaskAction, name: string, text: string, id: number, lease: Lease, extra: unknown[]): Promise<TaskRow[]> {
    const rows = await this.rows<TaskRow>(name, text, [id, lease.workerId, lease.leaseToken, await this.now(), ...extra]);
    if (rows.length > 0) return rows;
    const [state] = await this.rows<LeaseRow>("tp_lease_state", sql.LEASE_STATE, [id]);
    throw refusalError(id, state, action, lease);
  }

  async start(id: number, lease: Lease): Promise<Task> {
    return toTask((await this.guarded("start", "tp_start", sql.START, id, lease, []))[0]);
  }

  async heartbeat(id: number, lease: Lease, options: HeartbeatOptions = {}): Promise<Task> {
    const rows = await this.guarded("heartbeat", "tp_heartbeat", sql.HEARTBEAT, id, lease, [
      options.leaseSeconds ?? null,
      options.progress ?? null,
    ]);
    return toTask(rows[0]);
  }

  async checkpoint(id: number, lease: Lease, data: Json): Promise<Task> {
    const text = JSON.stringify(data);
    const omitted = omittedCheckpoint(text);
    return toTask((await this.guarded("checkpoint", "tp_checkpoint", sql.CHECKPOINT, id, lease, [text, omitted && JSON.stringify(omitted)]))[0]);
  }

  async progress(id: number, lease: Lease, progress: number): Promise<Task> {
    return toTask((await this.guarded("progress", "tp_progress", sql.PROGRESS, id, lease, [progress]))[0]);
  }

  async complete(id: number, lease: Lease, options: CompleteOptions = {}): Promise<CompleteResult> {
    const result = options.result ?? null;
    const inputs = options.followUps ?? [];
    const types = inputs.length > 0 ? await this.latestTypes(typeNames(inputs)) : new Map<string, TaskTypeRecord>();
    const followUps = prepareNewTasks(inputs, await this.now(), types, this.rules, id);
    const rows = await this.guarded("complete", "tp_complete", sql.COMPLETE, id, lease, [
      JSON.stringify(result),
      newTasksJson(followUps),
      this.channel,
    ]);
    const kinds = rows as (TaskRow & { row_kind: string })[];
    return {
      task: toTask(kinds.find((r) => r.row_kind === "done") as TaskRow),
      followUps: kinds.filter((r) => r.row_kind === "follow_up").map(toTask).sort((a, b) => a.id - b.id),
    };
  }

  async completeMany(items: Completion[], options: BatchOptions = {}): Promise<BatchOutcome[]> {
    const tasks = options.returnTasks === true;
    const applied = await this.rows<TaskRow>(`tp_complete_many${tasks ? "_tasks" : ""}`, sql.completeMany(tasks), [
      ...leaseColumns(items),
      await this.now(),
      items.map((i) => JSON.stringify(i.result ?? null)),
    ]);
    return this.outcomes("complete", items, applied, tasks);
  }

  async failMany(items: Failure[], options: BatchOptions = {}): Promise<BatchOutcome[]> {
    const tasks = options.returnTasks === true;
    const applied = await this.rows<TaskRow>(`tp_fail_many${tasks ? "_tasks" : ""}`, sql.failMany(tasks), [
      ...leaseColumns(items),
      await this.now(),
      items.map((i) => i.error),
      items.map((i) => i.retryable !== false),
      items.map(() => this.random()),
      items.map((i) => i.stack ?? null),
    ]);
    return this.outcomes("fail", items, applied, tasks);
  }

  /** Matches a batch's applied rows to its items; each refused item gets the error a single call would throw. */
  private async outcomes(action: TaskAction, items: (Completion | Failure)[], applied: TaskRow[], tasks: boolean): Promise<BatchOutcome[]> {
    const byId = new Map(applied.map((r) => [r.id, r]));
    return Promise.all(
      items.map(async ({ id, lease }): Promise<BatchOutcome> => {
        const row = byId.get(id);
        if (row) return { id, ok: true, status: row.status, scheduledFor: row.scheduled_for, ...(tasks ? { task: toTask(row) } : {}) };
        const [state] = await this.rows<LeaseRow>("tp_lease_state", sql.LEASE_STATE, [id]);
        return { id, ok: false, error: refusalError(id, state, action, lease) };
      }),
    );
  }

  async fail(id: number, lease: Lease, options: FailOptions): Promise<Task> {
    const rows = await this.guarded("fail", "tp_fail", sql.FAIL, id, lease, [options.error, options.retryable !== false, this.random(), options.stack ?? null]);
    return toTask(rows[0]);
  }

  async release(id: number, lease: Lease, options: ReleaseOptions = {}): Promise<Task> {
    const replace = options.checkpoint !== undefined;
    const rows = await this.guarded("release", "tp_release", sql.RELEASE, id, lease, [
      replace,
      replace ? JSON.stringify(options.checkpoint) : null,
      options.reason ?? null,
    ]);
    return toTask(rows[0]);
  }

  /** Operator actions: no lease, just the state machine. */
  private async operatorAction(action: TaskAction, name: string, text: string, id: number, values: unknown[]): Promise<Task> {
    const rows = await this.rows<TaskRow>(name, text, values);
    if (rows.length > 0) return toTask(rows[0]);
    const [state] = await this.rows<LeaseRow>("tp_lease_state", sql.LEASE_STATE, [id]);
    throw refusalError(id, state, action);
  }

  async cancel(id: number, options: CancelOptions = {}): Promise<Task> {
    return this.operatorAction("cancel", "tp_cancel", sql.CANCEL, id, [id, await this.now(), options.reason ?? null, this.channel]);
  }

  async retry(id: number, options: RetryOptions = {}): Promise<Task> {
    try {
      return await this.operatorAction("retry", "tp_retry", sql.RETRY, id, [id, await this.now(), options.resetCheckpoint === true]);
    } catch (error) {
      if (isUniqueViolation(error, "tasks_pending_unique_key")) throw new UniqueKeyTakenError(id);
      throw error;
    }
  }

  async reserve(id: number, workerId: string, seconds: number): Promise<Task> {
    return this.operatorAction("reserve", "tp_reserve", sql.RESERVE, id, [id, workerId, await this.now(), seconds]);
  }

  async get(id: number): Promise<Task | null> {
    const [row] = await this.rows<TaskRow>("tp_get", sql.GET, [id]);
    return row ? toTask(row) : null;
  }

  async list(filter?: TaskFilter, page?: Page): Promise<TaskPage> {
    const q = resolveList(filter, page);
    const statuses = q.statuses && [...new Set(q.statuses)].sort();
    const present = { taskType: q.taskType !== null, workerId: q.workerId !== null, search: q.search !== null, cursor: q.afterCursor !== null };
    const name = `tp_list_${q.order}_${Object.values(present).map(Number).join("")}_${statuses?.join("_") ?? "any"}`;
    const values = [q.readLimit, q.taskType, q.workerId, q.search, q.afterCursor].filter((v) => v !== null);
    return pageOf((await this.operatorRows<TaskRow>(name, sql.listStatement({ statuses, ...present }, q.order), values)).map(toTask), q);
  }

  async counts(): Promise<TaskCounts> {
    const rows = await this.operatorRows<{ task_type: string; status: Task["status"]; n: number }>("tp_counts", sql.COUNTS, []);
    return tallyCounts(rows);
  }

  /** See RECOUNT_LOCK for why completions go on meanwhile and the result is exact. No query timeout: it reads every completed task. */
  async recount({ dryRun = false }: RecountOptions = {}): Promise<RecountResult> {
    type Row = { task_type: string; before: number; after: number };
    return inTransaction(this.pool, async (client) => {
      await client.query(LIFT_STATEMENT_TIMEOUT);
      if (dryRun) return recountResult((await client.query<Row>({ text: sql.RECOUNT_PREVIEW, ...UNTIMED })).rows, true);
      await client.query({ text: sql.RECOUNT_LOCK, ...UNTIMED });
      return recountResult((await client.query<Row>({ text: sql.RECOUNT, ...UNTIMED })).rows, false);
    });
  }

  async events(taskId: number, query: EventsQuery = {}): Promise<TaskEvent[]> {
    return (await this.rows<EventRow>("tp_events", sql.EVENTS, [taskId, query.limit ?? null])).map(toEvent);
  }

  async registerTaskType(definition: TaskTypeDefinition): Promise<RegisterTaskTypeResult> {
    const spec = resolveTaskType(definition);
    for (;;) {
      const [latest] = await this.rows<TaskTypeRow>("tp_latest_task_types", typeSql.LATEST_TASK_TYPES, [[spec.name]]);
      if (latest && sameDefinition(toTaskType(latest), spec)) return { taskType: toTaskType(latest), created: false };
      const [row] = await this.rows<TaskTypeRow>("tp_insert_task_type", typeSql.INSERT_TASK_TYPE, [
        spec.name,
        (latest?.version ?? 0) + 1,
        spec.description,
        spec.paramsSchema === null ? null : JSON.stringify(spec.paramsSchema),
        spec.priority,
        spec.maxAttempts,
        JSON.stringify(spec.backoff),
        spec.timeoutSeconds,
        spec.recoveryPolicy,
        spec.maxRunning,
        await this.now(),
      ]);
      // No row: another registration took that version number first; compare with it and go on.
      if (row) return { taskType: toTaskType(row), created: true };
    }
  }

  async getTaskType(name: string): Promise<TaskTypeRecord | null> {
    const [row] = await this.rows<TaskTypeRow>("tp_latest_task_types", typeSql.LATEST_TASK_TYPES, [[name]]);
    return row ? toTaskType(row) : null;
  }

  async listTaskTypes(): Promise<TaskTypeRecord[]> {
    return (await this.rows<TaskTypeRow>("tp_list_task_types", typeSql.LIST_TASK_TYPES, [])).map(toTaskType);
  }

  async taskTypeVersions(name: string): Promise<TaskTypeRecord[]> {
    return (await this.rows<TaskTypeRow>("tp_task_type_versions", typeSql.TASK_TYPE_VERSIONS, [name])).map(toTaskType);
  }

  async workerHeartbeat(beat: WorkerBeat): Promise<WorkerBeatResult> {
    return (await this.workerHeartbeatMany([beat]))[0];
  }

  async workerHeartbeatMany(beats: WorkerBeat[]): Promise<WorkerBeatResult[]> {
    const rows = beats.map((b) => ({
      worker_id: b.workerId,
      run_id: b.runId ?? null,
      roles: b.roles ?? null,
      hostname: b.hostname ?? null,
      pid: b.pid ?? null,
      version: b.version ?? null,
      capacity: b.capacity ?? null,
      current_load: b.currentLoad ?? null,
      tasks_processed: b.tasksProcessed ?? null,
      metadata: b.metadata ?? null,
      all_leases: b.allLeases === true,
    }));
    const leases = beats.flatMap((b) => (b.leases ?? []).map((l) => ({ ...l, workerId: b.workerId })));
    const [row] = await this.rows<{ held_by: string[]; held: string[]; released: string[] }>("tp_worker_heartbeat", workerSql.WORKER_HEARTBEAT, [
      JSON.stringify(rows),
      await this.now(),
      leases.map((l) => l.workerId),
      leases.map((l) => l.taskId),
      leases.map((l) => l.leaseToken),
      WORKER_BEAT_DEFAULTS.roles,
      WORKER_BEAT_DEFAULTS.capacity,
      WORKER_BEAT_DEFAULTS.currentLoad,
      WORKER_BEAT_DEFAULTS.tasksProcessed,
      UNKNOWN_TO_ITS_WORKER,
    ]);
    if (row.released.length > 0) await this.notify("");
    const held = new Set(row.held.map((id, i) => `${row.held_by[i]}:${id}`));
    return beats.map((b) => ({ lost: (b.leases ?? []).map((l) => l.taskId).filter((id) => !held.has(`${b.workerId}:${id}`)) }));
  }

  async shutdownWorker(workerId: string, runId?: string): Promise<number[]> {
    const rows = await this.rows<{ known: boolean; id: number | null }>("tp_worker_shutdown", workerSql.WORKER_SHUTDOWN, [workerId, await this.now(), runId ?? null]);
    const released = rows.flatMap((r) => (r.id === null ? [] : [r.id]));
    if (released.length > 0) await this.notify("");
    else if (!rows[0].known) throw new WorkerNotFoundError(workerId);
    return released;
  }

  async listWorkers(query?: WorkerQuery): Promise<WorkerList> {
    const q = resolveWorkerList(query);
    const now = await this.now();
    const values = [q.liveStatuses, q.goneStatuses, q.liveAfter, q.goneAfter?.at ?? null, q.goneAfter?.workerId ?? null, q.workerId, q.liveReadLimit, q.goneReadLimit];
    const [rows, counts] = await Promise.all([
      this.rows<WorkerRow & { gone: boolean }>("tp_list_workers", workerSql.LIST_WORKERS, values),
      this.rows<{ status: WorkerStatus; n: string }>("tp_worker_counts", workerSql.WORKER_COUNTS, []),
    ]);
    const [live, gone] = [rows.filter((r) => !r.gone), rows.filter((r) => r.gone)].map((part) => part.map((r) => toWorker(r, now)));
    return workerPageOf(live, gone, q, workerCounts(counts));
  }

  async sweep(options: SweepOptions): Promise<SweepResult> {
    const now = await this.now();
    const result = await sweepPostgres(this.pool, now, options);
    if (result.requeued.length > 0) await this.notify("");
    // Housekeeping for counts() and throughput(), outside the sweep's transaction: it holds no lock a worker waits on.
    await this.rows("tp_fold_tallies", sql.FOLD_TALLIES, [throughputKeptSince(now)]);
    return result;
  }

  async nextRecoveryIn(options: SweepOptions): Promise<number | null> {
    const now = await this.now();
    const [row] = await this.rows<{ last_seen_at: Date | null; lease_expires_at: Date | null; abandoned: boolean }>("tp_next_recovery", workerSql.NEXT_RECOVERY, []);
    return secondsToRecovery(row.last_seen_at, row.lease_expires_at, row.abandoned, now, options.deadAfterSeconds);
  }

  async prune(options: PruneOptions): Promise<PruneResult> {
    return prunePostgres(this.pool, await this.now(), options);
  }

  async tryLead(name: string, holder: string, ttlSeconds: number): Promise<boolean> {
    return (await this.rows("tp_try_lead", workerSql.TRY_LEAD, [name, holder, await this.now(), ttlSeconds])).length > 0;
  }

  async resign(name: string, holder: string): Promise<void> {
    await this.rows("tp_resign", workerSql.RESIGN, [name, holder]);
  }

  async reassignments(options: ReassignmentQuery = {}): Promise<ReassignmentEvent[]> {
    const rows = await this.operatorRows<ReassignmentRow>("tp_list_reassignments", workerSql.LIST_REASSIGNMENTS, [options.limit ?? 100, options.taskId ?? null]);
    return rows.map(toReassignment);
  }

  async reassignmentStats(): Promise<ReassignmentStats> {
    const [[rate], failing, repeated] = await Promise.all([
      this.operatorRows<ReassignmentViewRows["rate"]>("tp_reassignment_rate", VIEW_READS.reassignmentRate, []),
      this.operatorRows<ReassignmentViewRows["failing"][number]>("tp_failing_workers", VIEW_READS.failingWorkers, []),
      this.operatorRows<ReassignmentViewRows["repeated"][number]>("tp_repeated_reassignments", VIEW_READS.repeatedReassignments, []),
    ]);
    return toReassignmentStats({ rate, failing, repeated });
  }

  async reassignmentRate(): Promise<ReassignmentStats["last24Hours"]> {
    const [rate] = await this.operatorRows<ReassignmentViewRows["rate"]>("tp_reassignment_rate", VIEW_READS.reassignmentRate, []);
    return toReassignmentRate(rate);
  }

  async capacity(): Promise<CapacityRow[]> {
    return (await this.operatorRows<CapacityViewRow>("tp_capacity", VIEW_READS.capacity, [])).map(toCapacity);
  }

  async throughput(query: ThroughputQuery = {}): Promise<Throughput> {
    const window = throughputWindow(await this.now(), query.minutes);
    return toThroughput(await this.operatorRows<ThroughputGroupRow>("tp_throughput", monitoringSql.THROUGHPUT, [window.since, window.until, query.taskType ?? null]), window);
  }

  async failures(query: FailuresQuery = {}): Promise<Failures> {
    const { limit, shown } = failuresParams(query);
    return toFailures(await this.operatorRows<FailureGroupRow>("tp_failures", monitoringSql.FAILURES, [limit, shown]), limit);
  }

  async subscribe(listener: (taskTypes: string[]) => void): Promise<() => Promise<void>> {
    return this.listener.add(listener);
  }

  /** An empty payload means "something changed, any type": listeners re-check. */
  private async notify(payload: string): Promise<void> {
    await this.rows("tp_notify", workerSql.NOTIFY, [this.channel, payload]);
  }

  async recordSweep(name: string, holder: string, intervalSeconds: number): Promise<void> {
    await this.rows("tp_record_sweep", workerSql.RECORD_SWEEP, [name, holder, await this.now(), intervalSeconds]);
  }

  async leadershipStatus(name: string): Promise<LeadershipStatus> {
    const now = await this.now();
    const [row] = await this.rows<LeadershipRow>("tp_leadership_status", workerSql.LEADERSHIP_STATUS, [name, now]);
    return toLeadershipStatus(row, now);
  }

  async createApiKey(key: NewApiKey): Promise<ApiKeyRecord> {
    const [row] = await this.rows<ApiKeyRow>("tp_insert_api_key", keySql.INSERT_API_KEY, [
      key.name ?? null,
      key.scope,
      key.keyHash,
      key.prefix,
      key.rateLimitPerMinute ?? null,
      await this.now(),
    ]);
    return toApiKey(row);
  }

  async listApiKeys(): Promise<ApiKeyRecord[]> {
    return (await this.rows<ApiKeyRow>("tp_list_api_keys", keySql.LIST_API_KEYS, [])).map(toApiKey);
  }

  async findApiKey(keyHash: string): Promise<ApiKeyRecord | null> {
    const [row] = await this.rows<ApiKeyRow>("tp_find_api_key", keySql.FIND_API_KEY, [keyHash]);
    return row ? toApiKey(row) : null;
  }

  async revokeApiKey(id: number): Promise<ApiKeyRecord> {
    const [row] = await this.rows<ApiKeyRow>("tp_revoke_api_key", keySql.REVOKE_API_KEY, [id, await this.now()]);
    if (!row) throw new ApiKeyNotFoundError(id);
    return toApiKey(row);
  }

  async saveSchedule(definition: ScheduleDefinition): Promise<SaveScheduleResult> {
    const now = await this.now();
    return inTransaction(this.pool, async (client) => {
      // In the save's transaction, the row held: checked before it, a delete committing in between left the fan-out reading no schedule.
      const readsFrom = resultsScheduleOf(definition);
      if (readsFrom !== null && !(await heldSchedule(client, readsFrom))) throw noResultsSchedule(readsFrom);
      const s = resolveSchedule(definition, await lockedSchedule(client, definition.name), now);
      // Read on the transaction's connection: a second one from the pool waited for good on a pool of one, and concurrent saves could starve a larger pool.
      const types = await this.latestTypes([s.taskType], async (name, text, values) => (await client.query({ name, text, values })).rows);
      checkScheduleTasks(s, types.get(s.taskType), this.rules);
      const values = [s.name, s.taskType, JSON.stringify(s.params), s.cron, s.timezone, s.enabled, s.fanOut === null ? null : JSON.stringify(s.fanOut), s.concurrencyKey, s.priority, s.missedTicks, s.nextRunAt, now, s.uniqueKey];
      const { rows: [row] } = await client.query<ScheduleRow & { created: boolean }>({ name: "tp_upsert_schedule", text: scheduleSql.UPSERT_SCHEDULE, values });
      return { schedule: toSchedule(row), created: row.created };
    });
  }

  async getSchedule(name: string): Promise<ScheduleRecord | null> {
    const [row] = await this.rows<ScheduleRow>("tp_get_schedule", scheduleSql.GET_SCHEDULE, [name]);
    return row ? toSchedule(row) : null;
  }

  async listSchedules(): Promise<ScheduleRecord[]> {
    return (await this.rows<ScheduleRow>("tp_list_schedules", scheduleSql.LIST_SCHEDULES, [])).map(toSchedule);
  }

  async setScheduleEnabled(name: string, enabled: boolean): Promise<ScheduleRecord> {
    const now = await this.now();
    return inTransaction(this.pool, async (client) => {
      const existing = await lockedSchedule(client, name);
      if (!existing) throw new ScheduleNotFoundError(name);
      const values = [name, enabled, nextRunWhen(existing, enabled, now), now];
      const { rows: [row] } = await client.query<ScheduleRow>({ name: "tp_set_schedule_enabled", text: scheduleSql.SET_SCHEDULE_ENABLED, values });
      return toSchedule(row);
    });
  }

  async cancelScheduleTasks(name: string): Promise<number[]> {
    const [row] = await this.rows<{ found: boolean; ids: number[] }>("tp_cancel_schedule_tasks", scheduleSql.CANCEL_SCHEDULE_TASKS, [name, await this.now(), scheduleCancelled(name)]);
    if (!row.found) throw new ScheduleNotFoundError(name);
    return row.ids.map(Number);
  }

  async removeSchedule(name: string): Promise<ScheduleRecord> {
    const [row] = await this.rows<ScheduleRow>("tp_delete_schedule", scheduleSql.DELETE_SCHEDULE, [name]);
    if (!row) throw new ScheduleNotFoundError(name);
    return toSchedule(row);
  }

  async fireDueSchedules(options: FireOptions): Promise<FiredSchedule[]> {
    return fireSchedules(this.scheduleWriter, await this.now(), options.graceSeconds * 1000);
  }

  async generateTasks(input: GenerateInput): Promise<GenerateResult> {
    return generateTasks({ ...this.scheduleWriter, enqueueMany: (inputs) => this.enqueueMany(inputs) }, await this.now(), input);
  }

  private readonly scheduleWriter: ScheduleWriter = {
    due: async (now) => (await this.rows<ScheduleRow>("tp_due_schedules", scheduleSql.DUE_SCHEDULES, [now])).map(toSchedule),
    lastRunResults: async (name) => (await this.rows<{ result: Json }>("tp_last_run_results", scheduleSql.LAST_RUN_RESULTS, [name])).map((r) => r.result),
    getSchedule: (name) => this.getSchedule(name),
    writeRun: (run) => this.writeRun(run),
    writePass: async (pass) => (await this.recordPass(this.pool, pass, null, storedRunResult(pass.result), await this.now())) > 0,
  };

  /** One transaction (see schedule-queries.ts): the tick's row, its tasks, the schedule's pass. */
  private async writeRun(run: RunWrite): Promise<number[] | null> {
    const now = await this.now();
    const prepared = prepareNewTasks(run.inputs, now, run.inputs.length > 0 ? await this.latestTypes(typeNames(run.inputs)) : new Map(), this.rules);
    try {
      return await inTransaction(this.pool, async (client) => {
        const tick = await client.query({ name: "tp_insert_tick", text: scheduleSql.INSERT_TICK, values: [run.name, run.tickAt, now] });
        const fresh = (tick.rowCount ?? 0) > 0;
        let ids: number[] = [];
        if (fresh && prepared.length > 0) {
          const tasks = await client.query<TaskRow>({ name: "tp_enqueue", text: sql.ENQUEUE, values: [newTasksJson(prepared), now, this.channel] });
          ids = tasks.rows.map((r) => r.id);
          await client.query({ name: "tp_set_tick_tasks", text: scheduleSql.SET_TICK_TASKS, values: [run.name, run.tickAt, ids] });
        }
        // A tick that fired before only moves the schedule on; its result stays the one of that run.
        if ((await this.recordPass(client, run, fresh ? run.tickAt : null, fresh ? storedRunResult(run.result(ids.length)) : null, now)) === 0) throw new RunOvertaken();
        return fresh ? ids : null;
      });
    } catch (error) {
      if (error instanceof RunOvertaken) return null;
      throw error;
    }
  }

  /**
   * The schedule's pass on `db` (the pool, or a run's transaction): the rows it changed, 0 when the
   * schedule changed since it was read. A null result keeps the last one. `now` is read by the caller
   * before its transaction: reading the database clock inside it would wait for a second pooled
   * connection while holding one.
   */
  private async recordPass(db: pg.Pool | pg.PoolClient, pass: Omit<PassWrite, "result">, ranTick: Date | null, result: string | null, now: Date): Promise<number> {
    const values = [pass.name, pass.expectedNextRunAt, pass.nextRunAt, ranTick, result, now];
    return (await db.query({ name: "tp_record_schedule_pass", text: scheduleSql.RECORD_PASS, values })).rowCount ?? 0;
  }
}


/** The gate of PostgresStoreOptions.operatorReads, its options checked. */
function readGate(options: PostgresStoreOptions["operatorReads"], poolSize: number, connectWaitMs: number): ReadGate {
  const concurrency = options?.concurrency ?? Math.max(1, Math.floor(poolSize / 5));
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > poolSize) {
    const why = `a whole number from 1 to poolSize (${poolSize})`;
    throw new ValidationError(`Invalid operatorReads.concurrency ${String(concurrency)}: ${why}`, [{ path: "operatorReads.concurrency", message: why }]);
  }
  return new ReadGate(concurrency, checkedMs("operatorReads.waitMs", options?.waitMs ?? connectWaitMs, 0, MAX_TIMER_MS));
}

/** The three lease arrays of a batch: ids, worker ids, tokens. */
function leaseColumns(items: { id: number; lease: Lease }[]): [number[], string[], string[]] {
  return [items.map((i) => i.id), items.map((i) => i.lease.workerId), items.map((i) => i.lease.leaseToken)];
}

function isUniqueViolation(error: unknown, constraint: string): boolean {
  const e = error as { code?: string; constraint?: string };
  return e?.code === UNIQUE_VIOLATION && e.constraint === constraint;
}

/** A schedule read and locked for the rest of `client`'s transaction (see LOCK_SCHEDULE). */
async function lockedSchedule(client: pg.PoolClient, name: string): Promise<ScheduleRecord | null> {
  const { rows: [row] } = await client.query<ScheduleRow>({ name: "tp_lock_schedule", text: scheduleSql.LOCK_SCHEDULE, values: [name] });
  return row ? toSchedule(row) : null;
}

/** Whether the schedule exists, kept from deletion until the transaction ends (HOLD_SCHEDULE). */
async function heldSchedule(client: pg.PoolClient, name: string): Promise<boolean> {
  const { rowCount } = await client.query({ name: "tp_hold_schedule", text: scheduleSql.HOLD_SCHEDULE, values: [name] });
  return (rowCount ?? 0) > 0;
}
