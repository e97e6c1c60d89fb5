/**
 * Calls `abort` on the first Ctrl-C (SIGINT) or SIGTERM, so a bench can stop and run its finally
 * blocks (dropping schemas, deleting temp files, stopping child processes); without a handler the
 * process would end on the spot. A signal more than a second after the first ends the process at
 * once. Not sooner: under `npm run`, tsx's CLI passes the terminal's SIGINT on to this process a
 * few milliseconds after the terminal itself sent it, and that copy must not count as a second.
 */
export function onInterrupt(abort: () => void): void {
  let first: number | undefined;
  const handle = (signal: NodeJS.Signals) => {
    const now = Date.now();
    if (first === undefined) {
      first = now;
      abort();
    } else if (now - first > 1000) {
      console.error(`${signal} again: exiting without cleaning up`);
      process.exit(130);
    }
  };
  process.on("SIGINT", handle);
  process.on("SIGTERM", handle);
}
