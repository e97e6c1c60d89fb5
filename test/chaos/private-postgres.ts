import { execFileSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";

/**
 * A PostgreSQL server of the test's own, for the scenarios that restart the database or kill its
 * connections: the shared server on 5432 serves other engineers' tests and must never be touched.
 * initdb refuses to run as root, so the cluster belongs to the postgres user; the socket lives in
 * the data directory and the server listens on 127.0.0.1 only, on a free port.
 */
export class PrivatePostgres {
  private constructor(
    readonly dir: string,
    readonly port: number,
  ) {}

  /** postgres://… for the server's `postgres` database. */
  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  /** Whether this machine can run one (PostgreSQL's binaries and a postgres user). */
  static available(): boolean {
    return binDir() !== null;
  }

  static async start(): Promise<PrivatePostgres> {
    const dir = mkdtempSync(join(tmpdir(), "taskpool-pg-"));
    const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
    chownSync(dir, uid, gid);
    const server = new PrivatePostgres(dir, await freePort());
    try {
      server.asPostgres("initdb", ["-D", server.data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"]);
      server.startAgain();
    } catch (error) {
      await server.stop();
      throw error;
    }
    return server;
  }

  /** `pg_ctl restart -m fast`: every session is cut, the server comes back on the same port. */
  restart(): void {
    this.ctl(["restart", "-m", "fast"]);
  }

  /** `pg_ctl stop`: the server goes away (sessions cut, new connections refused) until `startAgain()`. */
  shutDown(mode: "fast" | "immediate" = "fast"): void {
    this.ctl(["stop", "-m", mode]);
  }

  /** Starts the server (again) on its port, with its data as the last shutdown left it. */
  startAgain(): void {
    this.ctl(["start", "-o", `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`]);
  }

  /** pg_terminate_backend on every client session but the caller's; returns how many were ended. */
  async terminateConnections(): Promise<number> {
    const admin = new pg.Client({ connectionString: this.url, application_name: "chaos-terminator" });
    await admin.connect();
    try {
      const { rows } = await admin.query<{ ended: boolean }>(
        `SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`,
      );
      return rows.filter((r) => r.ended).length;
    } finally {
      await admin.end();
    }
  }

  /** Stops the server at once and deletes its files. */
  async stop(): Promise<void> {
    if (existsSync(join(this.data, "postmaster.pid"))) {
      try {
        this.ctl(["stop", "-m", "immediate"]);
      } catch {
        /* already down */
      }
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  private get data(): string {
    return join(this.dir, "data");
  }

  private ctl(args: string[]): void {
    this.asPostgres("pg_ctl", ["-D", this.data, "-l", join(this.dir, "server.log"), "-w", "-t", "30", ...args]);
  }

  private asPostgres(command: string, args: string[]): void {
    execFileSync("runuser", ["-u", "postgres", "--", join(binDir() as string, command), ...args], { stdio: "pipe", timeout: 60_000 });
  }
}

/** The newest installed PostgreSQL's bin directory, or null. */
function binDir(): string | null {
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return null;
  const versions = readdirSync(root).filter((v) => existsSync(join(root, v, "bin", "initdb"))).sort((a, b) => Number(b) - Number(a));
  return versions.length > 0 ? join(root, versions[0], "bin") : null;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
    server.on("error", reject);
  });
}
