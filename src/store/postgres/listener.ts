import pg from "pg";

type Listener = (taskTypes: string[]) => void;

/**
 * One LISTEN connection per store, shared by every subscriber. If the connection drops it reconnects
 * with backoff; a notification missed meanwhile only delays work until the next poll.
 */
export class PgListener {
  private client: pg.Client | null = null;
  private readonly listeners = new Set<Listener>();
  private closed = false;
  private retryMs = 100;
  private timer: NodeJS.Timeout | null = null;

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
    const client = new pg.Client({ connectionString: this.url });
    client.on("notification", (msg) => {
      const types = (msg.payload ?? "").split(",").filter(Boolean);
      for (const l of this.listeners) l(types);
    });
    client.on("error", () => this.reconnectLater(client));
    client.on("end", () => this.reconnectLater(client));
    try {
      await client.connect();
      await client.query(`LISTEN "${this.channel}"`);
      if (this.closed || this.listeners.size === 0) {
        client.removeAllListeners("end");
        await client.end();
        return;
      }
      this.client = client;
      this.retryMs = 100;
    } catch {
      this.reconnectLater(client);
    }
  }

  private reconnectLater(client: pg.Client): void {
    if (this.client === client) this.client = null;
    client.end().catch(() => {});
    if (this.closed || this.timer || this.listeners.size === 0) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.connect();
    }, this.retryMs);
    this.retryMs = Math.min(this.retryMs * 2, 10_000);
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
