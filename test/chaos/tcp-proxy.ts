import { createConnection, createServer, type Server, type Socket } from "node:net";

/**
 * A TCP proxy that can go half-open: `freeze()` stops forwarding in both directions without closing
 * anything (both ends still think the connection is fine: what a dead NAT entry or a stuck
 * middlebox does), and `thaw()` delivers what was held and forwards again. `freeze({ existingOnly })`
 * silences only the connections open now; new ones are forwarded (one dead route among live ones).
 * `freezeOn(marker)` silences a connection from the moment its client sends `marker` (a LISTEN): one
 * statement goes unanswered while every other connection works. A frozen connection holds a client's
 * goodbye (FIN) too, as a dead route does: ending it waits for good.
 */
export class TcpProxy {
  private frozenNew = false;
  private marker: string | null = null;
  private readonly frozen = new Set<{ frozen: boolean }>();
  private readonly held: (() => void)[] = [];
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(targetHost: string, targetPort: number): Promise<TcpProxy> {
    let proxy: TcpProxy | null = null;
    const server = createServer({ allowHalfOpen: true }, (client) => proxy?.accept(client, targetHost, targetPort));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    proxy = new TcpProxy(server, (server.address() as { port: number }).port);
    return proxy;
  }

  private accept(client: Socket, host: string, port: number): void {
    const upstream = createConnection({ host, port, allowHalfOpen: true });
    const state = { frozen: this.frozenNew };
    this.frozen.add(state);
    for (const [from, to] of [[client, upstream], [upstream, client]] as const) {
      this.sockets.add(from);
      from.on("data", (chunk: Buffer) => {
        if (from === client && this.marker !== null && chunk.includes(this.marker)) state.frozen = true;
        if (state.frozen) this.held.push(() => to.write(chunk));
        else to.write(chunk);
      });
      from.on("end", () => (state.frozen ? this.held.push(() => to.end()) : to.end()));
      from.on("error", () => to.destroy());
      from.on("close", () => (this.sockets.delete(from), to.destroy()));
    }
  }

  freeze(options: { existingOnly?: boolean } = {}): void {
    for (const c of this.frozen) c.frozen = true;
    this.frozenNew = options.existingOnly !== true;
  }

  /** Freezes each connection whose client sends `marker` from then on (null: no more). */
  freezeOn(marker: string | null): void {
    this.marker = marker;
  }

  thaw(): void {
    for (const c of this.frozen) c.frozen = false;
    this.frozenNew = false;
    for (const deliver of this.held.splice(0)) deliver();
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
