/** Waits until a `taskpool serve` at `url` answers /readyz (its database too), for up to 20 s. */
export async function waitForServer(url: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const ready = await fetch(`${url}/readyz`).then((r) => r.ok, () => false);
    if (ready) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the server at ${url} did not become ready`);
}
