import type { FastifyInstance } from "fastify";
import { afterAll, afterEach, beforeEach } from "vitest";
import { CheckedStore } from "../../src/api/checked-store.js";
import { Taskpool } from "../../src/api/taskpool.js";
import { ManualClock } from "../../src/core/clock.js";
import { buildServer, type ServerOptions } from "../../src/server/server.js";
import { SpareSchemas, type StoreKind, type TestStore } from "../helpers/stores.js";

/** An answer: status, parsed JSON body and headers. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- answers are read loosely, field by field
export type Body = Record<string, any>;

export interface Answer<B = Body> {
  status: number;
  body: B;
  headers: Headers;
}

/** A real server on a random loopback port, on a fresh store, on a manual clock. */
export interface ServerContext {
  app: FastifyInstance;
  pool: Taskpool;
  clock: ManualClock;
  url: string;
  /** The key sent when a call names none (set by a test; none by default). */
  key: string | null;
  call<B = Body>(method: string, path: string, body?: unknown, options?: { key?: string | null; headers?: Record<string, string>; raw?: string }): Promise<Answer<B>>;
}

export async function startServer(handle: TestStore, clock: ManualClock, options: ServerOptions) {
  const pool = new Taskpool(new CheckedStore(handle.store), null);
  const app = await buildServer(pool, options);
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  return { app, pool, url };
}

/** Real HTTP with Node's fetch; JSON in, JSON out. */
export async function request(url: string, method: string, path: string, body: unknown, key: string | null, headers: Record<string, string> = {}, raw?: string): Promise<Answer> {
  const h: Record<string, string> = { ...headers };
  if (body !== undefined || raw !== undefined) h["content-type"] ??= "application/json";
  if (key !== null) h["x-api-key"] = key;
  const response = await fetch(url + path, { method, headers: h, body: raw ?? (body === undefined ? undefined : JSON.stringify(body)) });
  const text = await response.text();
  return { status: response.status, body: text === "" ? {} : JSON.parse(text), headers: response.headers };
}

/** A fresh store and server per test (closed after it), on `kind`. */
export function useServer(kind: StoreKind, options: ServerOptions = { auth: "none" }): ServerContext {
  const ctx = { key: null } as ServerContext;
  let handle: TestStore;
  // Requests change rows only: each PostgreSQL test takes the schema the last one emptied.
  const spares = new SpareSchemas();
  afterAll(() => spares.dropAll());
  beforeEach(async () => {
    ctx.clock = new ManualClock();
    handle = await kind.create({ clock: ctx.clock, random: () => 0.5, spares });
    Object.assign(ctx, await startServer(handle, ctx.clock, options));
    ctx.key = null;
    ctx.call = (method, path, body, o = {}) => request(ctx.url, method, path, body, o.key === undefined ? ctx.key : o.key, o.headers, o.raw) as never;
  });
  afterEach(async () => {
    await ctx.app.close();
    await handle.cleanup();
  });
  return ctx;
}
