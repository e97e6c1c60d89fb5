import { randomBytes } from "node:crypto";
import Database from "better-sqlite3";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { CheckedStore } from "../src/api/checked-store.js";
import { connect, Taskpool } from "../src/api/taskpool.js";
import { NotOverHttpError } from "../src/client/errors.js";
import { HttpStore } from "../src/client/http-store.js";
import { taskpoolRun as taskpool } from "./helpers/cli.js";
import { dropSchema, PG_URL, removeSqliteFiles, sqlitePath } from "./helpers/stores.js";

/** Three completed product_resync tasks, two analytics_refresh and one pending product_resync, whose id it answers. */
async function seed(pool: Taskpool): Promise<number> {
  for (const [taskType, n] of [["product_resync", 3], ["analytics_refresh", 2]] as const) {
    await pool.enqueueMany(Array.from({ length: n }, () => ({ taskType })));
    const leases = await pool.protocol.claim({ workerId: "w1", taskTypes: [taskType], limit: n });
    await pool.protocol.completeMany(leases.map((t) => ({ id: t.id, lease: t })));
  }
  return (await pool.enqueue("product_resync", {})).id;
}

/** The counts an earlier version of taskpool can leave (docs/upgrading.md). */
const skew = (pendingId: number) => [
  // A task its worker completed without a tally (PostgreSQL; SQLite's triggers count it).
  `UPDATE tasks SET status = 'completed', completed_at = created_at WHERE id = ${pendingId}`,
  // A count too high, and one below zero for a type whose tasks retention deleted.
  `INSERT INTO completed_totals (task_type, n) VALUES ('analytics_refresh', 4) ON CONFLICT (task_type) DO UPDATE SET n = completed_totals.n + excluded.n`,
  `INSERT INTO completed_totals (task_type, n) VALUES ('long', -5)`,
];

const completed = async (pool: Taskpool) => Object.fromEntries(Object.entries((await pool.counts()).byType).map(([type, s]) => [type, s.completed ?? 0]));

describe("taskpool recount", () => {
  const path = sqlitePath();
  const db = `sqlite:${path}`;
  afterEach(() => removeSqliteFiles(path));

  it("on PostgreSQL: --dry-run shows each wrong count before and after and changes nothing; recount sets them right; again, nothing to change", async () => {
    const schema = `tp_cli_${randomBytes(4).toString("hex")}`;
    const pool = await connect(PG_URL, { schema });
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    try {
      const pendingId = await seed(pool);
      await admin.query(`SET search_path TO "${schema}"`);
      for (const statement of skew(pendingId)) await admin.query(statement);
      const common = ["--db", PG_URL, "--schema", schema];
      expect(await completed(pool)).toMatchObject({ product_resync: 3, analytics_refresh: 6, long: -5 });

      const dry = await taskpool("recount", "--dry-run", ...common);
      expect(dry.code, dry.stderr).toBe(0);
      expect(dry.stdout).toBe(
        [
          "TASK TYPE          BEFORE  AFTER  DIFFERENCE",
          "analytics_refresh       6      2          -4",
          "long                   -5      0           5",
          "product_resync          3      4           1",
          "",
          "Dry run: the completed counts of 3 of 3 task types would be set to their completed tasks; nothing was changed",
          "",
        ].join("\n"),
      );
      expect(await completed(pool)).toMatchObject({ product_resync: 3, analytics_refresh: 6, long: -5 });

      const run = await taskpool("recount", ...common);
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toMatch(/^TASK TYPE\s+BEFORE\s+AFTER\s+DIFFERENCE\nanalytics_refresh\s+6\s+2\s+-4\nlong\s+-5\s+0\s+5\nproduct_resync\s+3\s+4\s+1\n\nSet the completed counts of 3 of 3 task types to their completed tasks\n$/);
      expect(await completed(pool)).toEqual({ product_resync: 4, analytics_refresh: 2 });

      const again = await taskpool("recount", "--json", ...common);
      expect(again.code, again.stderr).toBe(0);
      expect(JSON.parse(again.stdout)).toEqual({ changed: [], taskTypes: 2, dryRun: false });
      expect((await taskpool("recount", ...common)).stdout).toBe("The completed counts of 2 task types match their completed tasks: nothing to change\n");
    } finally {
      await admin.end();
      await pool.close();
      await dropSchema(schema);
    }
  }, 60_000);

  it("on SQLite: sets a count that a statement around the triggers left wrong", async () => {
    const pool = await connect(db);
    try {
      const pendingId = await seed(pool);
      const file = new Database(path);
      for (const statement of skew(pendingId)) file.exec(statement);
      file.close();
      const run = await taskpool("recount", "--json", "--db", db);
      expect(run.code, run.stderr).toBe(0);
      expect(JSON.parse(run.stdout)).toEqual({
        changed: [
          { taskType: "analytics_refresh", before: 6, after: 2 },
          { taskType: "long", before: -5, after: 0 },
        ],
        taskTypes: 3,
        dryRun: false,
      });
      expect(await completed(pool)).toEqual({ product_resync: 4, analytics_refresh: 2 });
    } finally {
      await pool.close();
    }
  }, 60_000);

  it("refuses a server, a bad option and a missing file with one line saying what to do", async () => {
    const [server, option, missing] = await Promise.all([
      taskpool("recount", "--url", "http://127.0.0.1:1"),
      taskpool("recount", "--dry", "--db", db),
      taskpool("recount", "--db", db),
    ]);
    for (const [run, message] of [
      [server, /^taskpool: Recounting the completed tasks is not available over HTTP: use taskpool recount --db … on the server's database, not http:\/\/127\.0\.0\.1:1$/],
      [option, /^taskpool: unknown option '--dry'; see `taskpool recount --help`$/],
      [missing, /^taskpool: no database at /],
    ] as const) {
      expect(run.code, run.stderr).toBe(1);
      expect(run.stderr.trim()).toMatch(message);
      expect(run.stderr.trim().split("\n")).toHaveLength(1);
    }
  }, 60_000);

  it("is refused by the library over HTTP as by the CLI, before any request", async () => {
    const pool = new Taskpool(new CheckedStore(new HttpStore("http://127.0.0.1:1")), null);
    await expect(pool.recount()).rejects.toThrow(NotOverHttpError);
    await expect(pool.recount()).rejects.toThrow(/^Recounting the completed tasks is not available over HTTP: use taskpool recount --db … on the server's database$/);
    await pool.close();
  });
});
