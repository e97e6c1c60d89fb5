import type { Socket } from "node:net";
import pg from "pg";

type Listener = (taskTypes: string[]) => void;

/**
 * How often the LISTEN connection is asked a trivial question, and how long it (or a new connection)
 * has to answer. A connection can go silent without closing (a failover that leaves the old socket
 * open, a dead NAT entry, a stuck proxy): a LISTEN connection never sends, so without a question
 * nothing would notice, and no wake-up would ever come again while every query works on fresh
 * connections.
 */
const PING_MS = 5_000;

/**
 * One LISTEN connection per store, shared by every subscriber. If the connection drops, or stops
 * answering its pings, it reconnects with backoff; once it listens again, subscribers hear an empty
 * list (anything may have come meanwhile), so a notification missed in between does not wait for the
 * next poll (a worker polling once a minute waited that long).
 */
export class PgListener {
  /** The connection being opened or listening; events of an older one are ignored. */
  private client: pg.Client | null = null;
  private readonly listeners = new Set<Listener>();
  private closed = false;
  private retryMs = 100;
  private timer: NodeJS.Timeout | null = null;
  private ping: NodeJS.Timeout | null = null;

  constructor(
    private readonly url: string,
    private readonly channel: string,
  ) {}

  async add(listener: Listener): Promise<() => Promise<void>> {
    this.listeners.add(listener);
    if (!this.client && !this.timer) await this.connect();
    return async () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) await this.disconnect();
    };
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: PING_MS });
    this.client = client;
    client.on("notification", (msg) => {
      const types = (msg.payload ?? "").split(",").filter(Boolean);
      for (const l of this.listeners) l(types);
    });
    client.on("error", () => this.reconnectLater(client));
    client.on("end", () => this.reconnectLater(client));
    try {
      await client.connect();
      // Bounded like the pings: a LISTEN left unanswered held the worker's start (and its close) for
      // good, and once met on a reconnect, no ping ever ran again and no wake-up ever came.
      await client.query({ text: `LISTEN "${this.channel}"`, query_timeout: PING_MS } as pg.QueryConfig);
      // Closed or left by its last subscriber meanwhile (disconnect() let go of it).
      if (this.client !== client) {
        client.removeAllListeners("end");
        await endWithin(client, PING_MS);
        return;
      }
      const recovered = this.retryMs > 100;
      this.retryMs = 100;
      if (recovered) for (const l of this.listeners) l([]);
      this.ping = setInterval(() => {
        client.query({ text: "SELECT 1", query_timeout: PING_MS } as pg.QueryConfig).catch(() => this.reconnectLater(client));
      }, PING_MS);
      this.ping.unref();
    } catch {
      this.reconnectLater(client);
    }
  }

  private reconnectLater(client: pg.Client): void {
    if (this.client !== client) return;
    this.client = null;
    this.stopPing();
    void endWithin(client, PING_MS);
    if (this.closed || this.timer || this.listeners.size === 0) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.connect();
    }, this.retryMs);
    this.retryMs = Math.min(this.retryMs * 2, 10_000);
  }

  private stopPing(): void {
    if (this.ping) clearInterval(this.ping);
    this.ping = null;
  }

  /** Stops listening for good (the store is closing). */
  async close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
    await this.disconnect();
  }

  private async disconnect(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.stopPing();
    const client = this.client;
    this.client = null;
    if (client) {
      client.removeAllListeners("end");
      client.removeAllListeners("error");
      client.on("error", () => {});
      await endWithin(client, PING_MS);
    }
  }
}

/**
 * Ends `client`, or drops its socket past `ms`: pg's end() says goodbye and waits for the socket to
 * close, which on a connection gone silent never happens (a worker's SIGTERM waited for it for good).
 */
async function endWithin(client: pg.Client, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([client.end().catch(() => {}), new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
  // pg has no public way to drop a connection; its socket is on the Connection.
  (client as unknown as { connection: { stream: Socket } }).connection.stream.destroy();
}
