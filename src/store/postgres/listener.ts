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
 * answering its pings, it reconnects with backoff; a notification missed meanwhile only delays work
 * until the next poll.
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
      await client.query(`LISTEN "${this.channel}"`);
      // Closed or left by its last subscriber meanwhile (disconnect() let go of it).
      if (this.client !== client) {
        client.removeAllListeners("end");
        await client.end().catch(() => {});
        return;
      }
      this.retryMs = 100;
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
    client.end().catch(() => {});
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
      await client.end().catch(() => {});
    }
  }
}
