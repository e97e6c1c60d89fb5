/**
 * A reader that stops early (`taskpool status | head -1`) closes stdout's pipe: the rest of the output
 * is not wanted, which is no failure, and a one-shot command ends there (exit 0). `taskpool dev` stops
 * gracefully instead, as when its terminal closes: ended at once, it left its schedules to fire under
 * a later `taskpool serve`, its workers "active", and the next dev refusing to start.
 */

let onClose: () => void = () => process.exit(0);
let closed = false;

/** What a closed stdout does from now on, instead of ending the process. */
export function whenStdoutCloses(handler: () => void): void {
  onClose = handler;
}

/**
 * Hears stdout's errors: a broken pipe runs the handler once; each later write fails the same way and
 * is dropped. Any other (a full disk, ENOSPC) ends the process with one line on stderr, exit 1, as
 * every command's errors do: thrown from this listener, it was an uncaught exception's stack trace.
 */
export function watchStdout(): void {
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (closed) return;
    closed = true;
    if (error.code === "EPIPE") return onClose();
    process.stderr.write(`taskpool: could not write the output: ${error.message}\n`);
    process.exit(1);
  });
}
