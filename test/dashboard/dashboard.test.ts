import type { Browser, Locator, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, onTestFinished } from "vitest";
import { FAILURE_MESSAGE_SHOWN } from "../../src/core/schemas.js";
import type { Worker } from "../../src/worker/worker.js";
import { eventually } from "../helpers/logs.js";
import { killAll, startWorker, type WorkerProcess } from "../process/harness.js";
import { COORDINATION, type DashboardServer, launchBrowser, openDashboard, startDashboardServer } from "./harness.js";

const silent = (await import("pino")).pino({ level: "silent" });

describe("the dashboard in a real browser", () => {
  let browser: Browser;
  let server: DashboardServer;
  const procs: WorkerProcess[] = [];
  const workers: Worker[] = [];
  const pages: Page[] = [];

  beforeAll(async () => {
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
  });
  beforeEach(async () => {
    server = await startDashboardServer();
  });
  afterEach(async () => {
    await Promise.all(pages.splice(0).map((p) => p.close()));
    await Promise.all(workers.splice(0).map((w) => w.stop(0)));
    await Promise.all(starting.splice(0));
    await killAll(procs.splice(0));
    await server.close();
  });

  const open = async (key: string | null, hash?: string, before?: (page: Page) => Promise<unknown>) => {
    const page = await openDashboard(browser, server, key, hash, before);
    pages.push(page);
    return page;
  };
  /** Worker processes still starting: a test that fails meanwhile must not leave one running after it. */
  const starting: Promise<unknown>[] = [];
  const workerProcess = (id: string, env: Record<string, string>) => {
    const started = startWorker(server.handle, id, env).then((p) => {
      procs.push(p);
      return p;
    });
    starting.push(started.catch(() => {}));
    return started;
  };

  /** `count` tasks of type dl failed for good with `error`: a dead-letter group. */
  const failDl = async (error: string, count: number) => {
    await Promise.all(Array.from({ length: count }, () => server.pool.enqueue("dl", {}, { maxAttempts: 1 })));
    const leases = await server.pool.protocol.claim({ workerId: "w1", limit: count });
    for (const lease of leases) await server.pool.protocol.fail(lease.id, lease, { error });
    return leases.map((lease) => lease.id);
  };
  /**
   * The table's scrolling box (.scroll) has nothing to scroll sideways, nor the page; `cell` cuts `text`
   * at three lines, whole in its title and on a click, which opens the text and not the page a row
   * may open on its own click.
   */
  const fitsCut = async (page: Page, table: string, cell: Locator, text: string) => {
    await cell.waitFor({ timeout: 5000 });
    const box = await page.locator(table).evaluate((t) => ({ scroll: t.parentElement!.scrollWidth, client: t.parentElement!.clientWidth }));
    expect(box.scroll).toBeLessThanOrEqual(box.client);
    expect(await page.evaluate("document.documentElement.scrollWidth")).toBe(1280);
    const clamp = cell.locator(".clamp");
    expect(await clamp.getAttribute("title")).toBe(text);
    const shown = () => clamp.evaluate((e) => e.getBoundingClientRect().height);
    const cut = await shown();
    const hash = await page.evaluate("location.hash");
    await clamp.click();
    expect(await page.evaluate("location.hash")).toBe(hash);
    expect(await shown()).toBeGreaterThan(cut * 2);
    expect(await page.evaluate("document.documentElement.scrollWidth")).toBe(1280);
  };
  /**
   * Waits until `locator` shows, having the page poll again meanwhile as a tab shown again does at once
   * (usePoll): the Overview asks only every 5 s, and what is checked is what it shows, not when it asks.
   */
  const shownOnPoll = (page: Page, locator: Locator) =>
    eventually(
      async () => {
        await page.evaluate("document.dispatchEvent(new Event('visibilitychange'))");
        return locator.waitFor({ timeout: 500 }).then(() => true, () => false);
      },
      15_000,
      String(locator),
    );
  /** Holds the page's retry calls from the `from`-th on (0: all) until `release()`, a slow server, noting each task sent, in order; `before` runs as each call arrives. */
  const holdRetries = async (page: Page, { from = 0, before = async () => {} }: { from?: number; before?: (id: number) => Promise<unknown> } = {}) => {
    const sent: number[] = [];
    let release = () => {};
    const released = new Promise<void>((resolve) => (release = resolve));
    await page.route(
      (url) => /^\/api\/tasks\/\d+\/retry$/.test(url.pathname),
      async (route) => {
        const id = Number(new URL(route.request().url()).pathname.split("/")[3]);
        sent.push(id);
        await before(id);
        if (sent.length > from) await released;
        await route.continue();
      },
    );
    return { sent, release: () => release() };
  };

  it("a worker appears; SIGKILLed, it turns dead and its task is reassigned to the survivor, on the page", async () => {
    const task = await server.pool.enqueue("crawl", { pages: 100 });
    const victim = await workerProcess("victim", { WORKER_ROLE: "crawl", PAGE_MS: "200" });
    await victim.waitFor({ event: "page", taskId: task.id, page: 1 });
    // The task held, the survivor starts (a second or so) while the page is looked at.
    const survivorStarted = workerProcess("survivor", { WORKER_ROLE: "crawl", PAGE_MS: "5", CONCURRENCY: "2" });

    const page = await open(server.keys.producer, "#/workers");
    const victimRow = page.locator('tr[data-worker="victim"]');
    await victimRow.locator(".status-active").waitFor();
    await expect(victimRow.textContent()).resolves.toMatch(/^▸ victimactivecrawl/);
    await victimRow.click();
    await page.locator(".running-tasks").getByText(`#${task.id}`).waitFor();

    const survivor = await survivorStarted;
    await page.locator('tr[data-worker="survivor"] .status-active').waitFor();
    victim.child.kill("SIGKILL");
    await victimRow.locator(".status-dead").waitFor({ timeout: 15_000 });
    await survivor.waitFor({ event: "start", taskId: task.id });

    await page.click('nav a[href="#/overview"]');
    await page.locator("#dead-workers").getByText("victim").waitFor();
    await expect(page.locator("#recent-reassignments").textContent()).resolves.toMatch(/1 reassignment in the last 15 minutes/);
    await page.click('nav a[href="#/reassignments"]');
    const row = page.locator("#reassignments tbody tr").first();
    await row.getByText("survivor").waitFor();
    await expect(row.textContent()).resolves.toMatch(new RegExp(`#${task.id}victimsurvivorWorker died unexpectedlyreassigned`));

    await page.click(`#reassignments a[href="#/tasks/${task.id}"]`);
    await page.locator("#timeline").getByText("reassigned", { exact: true }).waitFor();
    await page.locator("h2 .status-completed").waitFor({ timeout: 15_000 });
    expect(await page.locator("#timeline strong").allTextContents()).toEqual(expect.arrayContaining(["created", "claimed", "requeued", "reassigned", "completed"]));
  });

  it("a worker's held tasks that cannot be read again say why, rather than showing the last list as what it holds now", async () => {
    let finish = () => {};
    const held = new Promise<void>((resolve) => (finish = resolve));
    const worker = server.pool.worker({ roles: ["hold"], workerId: "holder", pollIntervalMs: 100, heartbeatIntervalMs: 200, logger: silent, handlers: { hold: () => held } });
    workers.push(worker);
    await worker.start();
    const task = await server.pool.enqueue("hold", {});
    try {
      const page = await open(server.keys.producer, "#/workers");
      await page.click('tr[data-worker="holder"]');
      await page.locator(".running-tasks").getByText(`#${task.id}`).waitFor();
      await page.route(
        (url) => url.pathname === "/api/tasks" && url.searchParams.get("worker_id") === "holder",
        (route) => route.fulfill({ status: 503, contentType: "application/json", body: JSON.stringify({ success: false, error: "unavailable", message: "The database did not answer" }) }),
      );
      // The registry's own poll is answered meanwhile and keeps the header "live": the page is the only place to say it.
      await page.locator("[role=alert]", { hasText: "The database did not answer" }).waitFor({ timeout: 3000 });
    } finally {
      finish();
    }
  });

  it("the overview's banner lists workers that died within the last day; ones dead longer are only counted", async () => {
    const beat = (workerId: string) => server.pool.protocol.workerHeartbeat({ workerId, roles: ["crawl"], capacity: 1, currentLoad: 0, tasksProcessed: 0 });
    await beat("gone-today");
    await beat("gone-last-week");
    // Last heard an hour and 3 days ago: the coordinator (dead after 2 s here) declares both dead, as it would have then.
    const lastSeen = server.handle.store.db.prepare("UPDATE workers SET last_seen_at = ? WHERE worker_id = ?");
    lastSeen.run(new Date(Date.now() - 3_600_000).toISOString(), "gone-today");
    lastSeen.run(new Date(Date.now() - 3 * 86_400_000).toISOString(), "gone-last-week");
    // Before the page opens: the Overview's first poll shows them, rather than its next one, 5 s later.
    await eventually(async () => (await server.pool.workers()).workers.every((w) => w.status === "dead"), 10_000, "both workers to be declared dead");
    const page = await open(server.keys.producer, "#/overview");
    await page.locator("#dead-workers").getByText("gone-today").waitFor();
    await page.locator("#dead-long-ago").getByText("and 1 dead for over a day").waitFor();
    // It stayed red with every worker that ever died, until retention removed them a week later.
    expect(await page.locator("#dead-workers").textContent()).not.toContain("gone-last-week");
  });

  it("many gone workers are folded: the Workers page lists the live ones and a page of gone ones at a time; the banner names a few and counts the rest", async () => {
    const gone = Array.from({ length: 130 }, (_, i) => `gone-${String(i).padStart(3, "0")}`);
    await server.pool.protocol.workerHeartbeatMany([...gone, "shut-1", "live-1"].map((workerId) => ({ workerId, roles: ["crawl"], capacity: 1 })));
    await server.pool.protocol.shutdownWorker("shut-1");
    // Heard from a minute ago, a second apart (gone-129 last): the coordinator (dead after 2 s here) declares them dead.
    const lastSeen = server.handle.store.db.prepare("UPDATE workers SET last_seen_at = ? WHERE worker_id = ?");
    gone.forEach((id, i) => lastSeen.run(new Date(Date.now() - 200_000 + i * 1000).toISOString(), id));
    await eventually(async () => (await server.pool.workers({ status: "dead" })).counts.dead === gone.length, 10_000, "the workers to be declared dead");
    const beat = setInterval(() => void server.pool.protocol.workerHeartbeat({ workerId: "live-1" }).catch(() => {}), 500);
    onTestFinished(() => clearInterval(beat));

    const page = await open(server.keys.producer, "#/overview");
    const banner = page.locator("#dead-workers");
    await banner.getByText("gone-129").waitFor();
    expect(await banner.locator("a .status-dead").count()).toBe(5);
    // It reads the 100 dead most recently heard from: all died within the day, so more may have.
    await expect(banner.textContent()).resolves.toMatch(/^100\+ workers not heard from: .*gone-125 \(\d+ s\) and 95\+ more \(workers\)$/);

    await page.click('nav a[href="#/workers"]');
    await page.locator('#workers tr[data-worker="live-1"]').waitFor();
    await expect(page.locator("#gone-workers summary").textContent()).resolves.toMatch(/^131 gone workers 130 dead, 1 inactive/);
    const goneRows = page.locator("#gone-workers-table tbody tr[data-worker]");
    await expect.poll(() => goneRows.count()).toBe(100);
    expect(await goneRows.first().getAttribute("data-worker")).toBe("shut-1");
    expect(await page.locator("#workers tbody tr[data-worker]").count()).toBe(1);
    await page.click("#older-gone");
    await expect.poll(() => goneRows.count()).toBe(31);
    expect(await goneRows.last().getAttribute("data-worker")).toBe("gone-000");
    await page.locator('#workers tr[data-worker="live-1"]').waitFor();

    // One gone long ago, not on the first page, opened from its address.
    const old = await open(server.keys.producer, "#/workers?worker=gone-001");
    await old.locator('#gone-workers-table tr[data-worker="gone-001"][aria-expanded="true"]').waitFor();
  });

  it("a task back in the pool shows its last attempt's lease times as an earlier attempt's, not as a worker on it now", async () => {
    const task = await server.pool.enqueue("nobody-runs-this", {});
    const [claimed] = await server.pool.protocol.claim({ workerId: "gone", taskTypes: ["nobody-runs-this"], start: true });
    const lease = { workerId: "gone", leaseToken: claimed.leaseToken };
    await server.pool.protocol.heartbeat(task.id, lease);
    await server.pool.protocol.fail(task.id, lease, { error: "try again later" });
    const page = await open(server.keys.producer, `#/tasks/${task.id}`);
    await page.locator("h2 .status-pending").waitFor();
    const field = (name: string) => page.locator("dl.fields dt", { hasText: new RegExp(`^${name}$`) }).locator("xpath=following-sibling::dd[1]").innerText();
    await expect(field("last heartbeat")).resolves.toMatch(/ \(an earlier attempt\)$/);
    await expect(field("started")).resolves.toMatch(/ \(an earlier attempt\)$/);
    await expect(field("worker")).resolves.toBe("—");
  });

  it("a task whose reservation lapsed does not show as reserved for its worker: any worker may claim it", async () => {
    const task = await server.pool.enqueue("nobody-runs-this", {});
    // Reserved by a reassignment 30 s (the default) for a worker that never claimed it: a claim by any worker clears it.
    server.handle.store.db.prepare("UPDATE tasks SET reserved_for = ?, reserved_until = ? WHERE id = ?").run("slowpoke", new Date(Date.now() - 60_000).toISOString(), task.id);
    const page = await open(server.keys.producer, `#/tasks/${task.id}`);
    await page.locator("h2 .status-pending").waitFor();
    const field = page.locator("dl.fields dt", { hasText: /^reserved for$/ }).locator("xpath=following-sibling::dd[1]");
    await expect(field.innerText()).resolves.toMatch(/^— \(slowpoke's reservation lapsed at .+\)$/);
    // One still running names its worker.
    server.handle.store.db.prepare("UPDATE tasks SET reserved_until = ? WHERE id = ?").run(new Date(Date.now() + 60_000).toISOString(), task.id);
    await expect.poll(() => field.innerText(), { timeout: 3000 }).toMatch(/^slowpoke until .+/);
  });

  it("an admin retries a failed task from its page and it completes; a producer key sees no retry button", async () => {
    let calls = 0;
    const worker = server.pool.worker({
      roles: ["flaky"],
      workerId: "in-process",
      pollIntervalMs: 100,
      heartbeatIntervalMs: 200,
      logger: silent,
      handlers: {
        async flaky() {
          if (calls++ === 0) throw new Error("upstream answered 503 (simulated)");
          return { ok: true };
        },
      },
    });
    workers.push(worker);
    await worker.start();
    const task = await server.pool.enqueue("flaky", { storeId: 7 }, { maxAttempts: 1 });
    await eventually(async () => (await server.pool.get(task.id))?.status === "failed", 10_000, "the task to fail");

    // A filter the server refuses is said, and the role picker that could fix it still lists the roles.
    const filtered = await open(server.keys.producer, "#/tasks?status=bogus");
    await filtered.locator("[role=alert]").getByText(/status/).waitFor();
    await filtered.locator('select[name="task_type"] option', { hasText: "flaky" }).waitFor({ state: "attached" });

    const viewer = await open(server.keys.producer, `#/tasks/${task.id}`);
    await viewer.locator("#task-error").waitFor();
    expect(await viewer.locator("#task-error").innerText()).toMatch(/^error: upstream answered 503 \(simulated\)\n/);
    // Where it went wrong: the handler's stack, folded under the error until opened.
    const stack = viewer.locator("#task-error-stack");
    expect(await stack.locator("pre").isVisible()).toBe(false);
    await stack.locator("summary").click();
    await stack.locator("pre").waitFor();
    expect(await stack.locator("pre").innerText()).toMatch(/^Error: upstream answered 503 \(simulated\)\n\s+at (Object\.)?flaky \(.*dashboard\.test\.ts:\d+:\d+\)/);
    expect(await viewer.locator("#timeline details.stack").count()).toBe(1);
    await viewer.click('nav a[href="#/dead-letter"]');
    await viewer.locator("tr.dead-group").getByText("upstream answered 503 (simulated)").waitFor();
    expect(await viewer.locator("#retry, .retry-group").count()).toBe(0);

    const admin = await open(server.keys.admin, "#/dead-letter");
    await admin.locator(".retry-group").waitFor();
    await admin.click(`tr.dead-group a[href="#/tasks/${task.id}"]`);
    await admin.click("#retry");
    await admin.locator("h2 .status-completed").waitFor({ timeout: 10_000 });
    await admin.locator("pre").getByText('"ok": true').waitFor();
    expect(await admin.locator("#retry").count()).toBe(0);
    // "Put back in the pool." stood beside the task once it had run (beside a new Retry, had it failed again).
    await admin.locator(".actions [role=status]").waitFor({ state: "detached" });
    expect(await server.pool.get(task.id)).toMatchObject({ status: "completed", result: { ok: true } });
  });

  it("a task retried from its page while a poll was out shows the retry, not that poll's answer from before it", async () => {
    const [id] = await failDl("gave up", 1);
    const page = await open(server.keys.admin, `#/tasks/${id}`);
    await page.locator("#retry").waitFor();
    // The tab shown again polls at once, and the admin clicks Retry while that answer, read before the retry, is on its way.
    let polled = () => {};
    const pollRead = new Promise<void>((resolve) => (polled = resolve));
    let deliver = () => {};
    const delivered = new Promise<void>((resolve) => (deliver = resolve));
    await page.route(
      (url) => url.pathname === `/api/tasks/${id}`,
      async (route) => {
        const response = await route.fetch();
        polled();
        await delivered;
        await route.fulfill({ response });
      },
      { times: 1 },
    );
    await page.route(
      (url) => url.pathname === `/api/tasks/${id}/retry`,
      async (route) => {
        await page.evaluate("document.dispatchEvent(new Event('visibilitychange'))");
        await pollRead;
        await route.continue();
      },
    );
    await page.click("#retry");
    await page.locator(".actions [role=status]", { hasText: "Put back in the pool." }).waitFor();
    deliver();
    // A finished task's page asks again only every 30 s: the answer from before the retry must not stand that long.
    await page.locator("h2 .status-pending").waitFor({ timeout: 3000 });
    expect(await page.locator("#retry").count()).toBe(0);
  });

  it("an admin who cancels a task from its page is told it was, and why not when it could not be", async () => {
    const [task, raced] = await Promise.all([server.pool.enqueue("nobody-runs-this", {}), server.pool.enqueue("nobody-runs-this", {})]);
    const page = await open(server.keys.admin, `#/tasks/${task.id}`);
    page.on("dialog", (dialog) => dialog.accept());
    await page.click("#cancel");
    await page.locator("h2 .status-cancelled").waitFor();
    // A cancelled task has no action left; what was done still shows, past the reload that found it cancelled.
    expect(await page.locator(".actions [role=status]").allTextContents()).toEqual(["Cancelled."]);
    expect(await server.pool.get(task.id)).toMatchObject({ status: "cancelled" });

    // Someone else cancelled it first: the server's refusal shows beside the status it left.
    await page.route((url) => url.pathname === `/api/tasks/${raced.id}/cancel`, async (route) => {
      await server.pool.cancel(raced.id, { reason: "from a script" });
      await route.continue();
    });
    await page.evaluate(`location.hash = '#/tasks/${raced.id}'`);
    await page.locator("h2", { hasText: `Task #${raced.id}` }).waitFor();
    expect(await page.locator(".actions [role=status]").count()).toBe(0); // the last task's outcome is not this one's (its page starts over)
    await page.click("#cancel");
    await page.locator("h2 .status-cancelled").waitFor();
    expect(await page.locator(".actions [role=status]").allTextContents()).toEqual([expect.stringMatching(/only pending, claimed or running tasks can be cancelled/)]);
  });

  it("an action the server could not be reached for says so, and does not promise a retry it will not make", async () => {
    const task = await server.pool.enqueue("nobody-runs-this", {});
    const page = await open(server.keys.admin, `#/tasks/${task.id}`);
    page.on("dialog", (dialog) => dialog.accept());
    let calls = 0;
    await page.route(
      (url) => url.pathname === `/api/tasks/${task.id}/cancel`,
      (route) => {
        calls++;
        return route.abort("connectionrefused");
      },
    );
    await page.click("#cancel");
    const outcome = page.locator(".actions [role=status]");
    await outcome.getByText("The server cannot be reached").waitFor();
    await page.waitForTimeout(1500);
    expect(calls).toBe(1);
    expect(await outcome.textContent()).not.toMatch(/retrying/);
    expect(await server.pool.get(task.id)).toMatchObject({ status: "pending" });
  });

  it("the overview shows the throughput of every role, or of the one picked", async () => {
    const worker = server.pool.worker({
      roles: ["crawl", "parse"],
      pollIntervalMs: 100,
      logger: silent,
      handlers: { async crawl() {}, async parse() {} },
    });
    workers.push(worker);
    await worker.start();
    for (const type of ["crawl", "crawl", "parse"]) await server.pool.enqueue(type, {});
    await eventually(async () => (await server.pool.counts()).byStatus.completed === 3, 10_000, "the tasks to complete");

    const page = await open(server.keys.producer, "#/overview");
    const completed = page.locator("section:has(#throughput-role) .card .status-completed");
    await completed.getByText("3", { exact: true }).waitFor();
    await page.selectOption("#throughput-role", "crawl");
    await completed.getByText("2", { exact: true }).waitFor();
    expect(page.url()).toMatch(/#\/overview\?role=crawl$/);
    await page.selectOption("#throughput-role", "parse");
    await completed.getByText("1", { exact: true }).waitFor();
    await page.selectOption("#throughput-role", "");
    await completed.getByText("3", { exact: true }).waitFor();
    // A role no task type can be (typed into the address): said in its panel, the picker beside it to fix it.
    await page.evaluate("location.hash = '#/overview?role=%25'");
    await page.locator("section:has(#throughput-role) [role=alert]").getByText(/task_type/).waitFor();
    await page.selectOption("#throughput-role", "");
    await completed.getByText("3", { exact: true }).waitFor();
  });

  it("the capacity page says how long each role's oldest ready task has waited, and flags a role no worker serves", async () => {
    await server.pool.enqueue("crawl", {}, { scheduledFor: new Date(Date.now() - 2 * 3_600_000) });
    await server.pool.enqueue("parse", {}, { scheduledFor: new Date(Date.now() + 3_600_000) });
    const page = await open(server.keys.producer, "#/capacity");
    const row = (role: string) => page.locator("#capacity tbody tr", { has: page.getByRole("link", { name: role, exact: true }) });
    await row("crawl").locator("td.oldest-ready").getByText("2 h", { exact: true }).waitFor();
    // Pending but not due: nothing has waited yet.
    await row("parse").locator("td.oldest-ready").getByText("—", { exact: true }).waitFor();
    expect(await row("crawl").locator("td.status-failed").count()).toBeGreaterThan(0);
  });

  it("shows a large pool's counts whole, each in its own card", async () => {
    // What a pool with a long history answers; the server here holds a handful of tasks.
    const byStatus = { pending: 50_000, claimed: 300, running: 600, completed: 12_925_372, failed: 18_982, cancelled: 4_746 };
    const page = await open(server.keys.producer, "#/workers");
    await page.route((url) => url.pathname === "/api/tasks/counts", (route) => route.fulfill({ json: { success: true, by_status: byStatus, by_type: { crawl: byStatus } } }));
    await page.evaluate("location.hash = '#/overview'");
    await page.locator(".card .status-completed", { hasText: "12,925,372" }).waitFor();
    // In the page (this file has no DOM types): the cards whose content is wider than they are.
    const overflowing = await page.evaluate("[...document.querySelectorAll('.card')].filter((c) => c.scrollWidth > c.clientWidth).map((c) => c.innerText.replace(/\\s+/g, ' '))");
    expect(overflowing).toEqual([]);
  });

  it("says how long ago things happened by the server's clock, in a browser whose clock is 10 minutes fast", async () => {
    const task = await server.pool.enqueue("report", { day: 1 });
    const page = await browser.newPage();
    pages.push(page);
    await page.clock.install({ time: Date.now() + 10 * 60_000 });
    await page.goto(`${server.url}/?interval=500#/tasks/${task.id}`);
    await page.fill("#api-key", server.keys.producer);
    await page.click("button[type=submit]");
    const created = page.locator("dl.fields dt", { hasText: /^created$/ }).locator("xpath=following-sibling::dd[1]");
    await created.getByText(/ago\)$/).waitFor();
    // Seconds (the test's own steps), not the browser's "10 min".
    expect(await created.innerText()).toMatch(/\(\d+(\.\d)? s ago\)$/);
  });

  it("polls a slow answer less often, and the Tasks page's role list rarely", async () => {
    await server.pool.enqueue("crawl", { store: "green leaf" });
    const page = await open(server.keys.producer, "#/workers");
    const asked = { list: 0, counts: 0 };
    // A search reads every task: at a million tasks on PostgreSQL it answers in 1-2 s. Here it is made to take 400 ms.
    await page.route((url) => url.pathname === "/api/tasks", async (route) => {
      asked.list++;
      await new Promise((resolve) => setTimeout(resolve, 400));
      await route.continue();
    });
    await page.route((url) => url.pathname === "/api/tasks/counts", (route) => {
      asked.counts++;
      return route.continue();
    });
    await page.evaluate("location.hash = '#/tasks?search=green'");
    await page.locator("#tasks tbody tr").waitFor();
    // Polled every 500 ms (the harness's interval), the list was asked for again every 0.9 s, and the
    // counts every 0.5 s for the role picker alone; now the list waits 10 times its 0.4 s.
    await page.waitForTimeout(3000);
    expect(asked.list).toBeLessThanOrEqual(2);
    expect(asked.counts).toBe(1);
  });

  it("a server that answers after hanging is asked again within 10 periods, not 10 times as long as it hung", async () => {
    // The page's clock is moved on over the waits rather than waited out: every time the page measures is on it.
    const page = await open(server.keys.producer, "#/workers", (p) => p.clock.install());
    await page.locator("#live", { hasText: "live · updated" }).waitFor();
    // Stopped (SIGSTOP, a VM paused) for eight periods, then answering: the header said it was waiting.
    let asked = () => {};
    const out = new Promise<void>((resolve) => (asked = resolve));
    let answer = () => {};
    const held = new Promise<void>((resolve) => (answer = resolve));
    await page.route(
      (url) => url.pathname === "/api/workers",
      async (route) => {
        asked();
        await held;
        await route.continue();
      },
      { times: 1 },
    );
    await out;
    await page.clock.fastForward(4000);
    await page.locator("#live", { hasText: "waiting" }).waitFor({ timeout: 5000 });
    answer();
    await page.locator("#live", { hasText: "live · updated" }).waitFor({ timeout: 5000 });
    // 10 times 4 s is 40 s under "live" with nothing asked (20 min after a 2-minute outage at the default period).
    const next = page.waitForRequest((request) => new URL(request.url()).pathname === "/api/workers", { timeout: 5000 });
    await page.clock.fastForward(6000);
    await next;
  });

  it("a 503's retry_after puts every poll off that long (at most 5 minutes), the header saying until when, and the page comes back by itself", async () => {
    const page = await open(server.keys.producer, "#/workers");
    await page.locator("#live", { hasText: "live · updated" }).waitFor();
    const asked: number[] = [];
    page.on("request", (request) => {
      if (new URL(request.url()).pathname === "/api/workers") asked.push(Date.now());
    });
    // The database unreachable: the server answers 503 database_unavailable with retry_after 1 (s).
    const workers = server.pool.workers;
    server.pool.workers = () => Promise.reject(Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED", syscall: "connect" }));
    const since = asked.length;
    await page.locator("#live", { hasText: /^⚠ The database cannot be reached .* · waiting until \d{1,2}:\d{2}:\d{2}.* \(\d+(\.\d)? s\), as the server asked$/ }).waitFor({ timeout: 5000 });
    await eventually(() => asked.length - since >= 3, 10_000, "three polls since the database went");
    // Every period (500 ms here) it was asked again; now once a second, as retry_after says.
    const gaps = asked.slice(since).map((at, i, all) => (i === 0 ? null : at - all[i - 1])).slice(1);
    expect(gaps.length).toBeGreaterThanOrEqual(2);
    for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(900);

    // A proxy's 503 in the server's place: no envelope, a Retry-After header alone.
    server.pool.workers = workers;
    await page.route((url) => url.pathname === "/api/workers", (route) => route.fulfill({ status: 503, contentType: "text/html", headers: { "retry-after": "3" }, body: "<h1>503 Service Unavailable</h1>" }), { times: 1 });
    await page.locator("#live", { hasText: /^⚠ HTTP 503 · waiting until .*, as the server asked$/ }).waitFor({ timeout: 5000 });
    const refusedAt = asked.at(-1) as number;
    await page.locator("#live", { hasText: /^live · updated/ }).waitFor({ timeout: 6000 });
    expect(asked.at(-1)! - refusedAt).toBeGreaterThanOrEqual(2950);

    // A Retry-After of a day would leave the page dead until reloaded: the wait is capped at 5 minutes.
    await page.route((url) => url.pathname === "/api/workers", (route) => route.fulfill({ status: 503, contentType: "text/html", headers: { "retry-after": "86400" }, body: "<h1>503</h1>" }), { times: 1 });
    await page.locator("#live", { hasText: /^⚠ HTTP 503 · waiting until .* \(5 min\), as the server asked$/ }).waitFor({ timeout: 5000 });
  });

  it("the Tasks page's filters changed on page 2 start at page 1, never sending page 2's cursor with the new filters", async () => {
    await server.pool.enqueueMany(Array.from({ length: 30 }, (_, i) => ({ taskType: i % 2 ? "crawl" : "mail", params: {} })));
    const page = await open(server.keys.producer, "#/tasks");
    const refused: string[] = [];
    page.on("response", (response) => {
      if (new URL(response.url()).pathname === "/api/tasks" && response.status() !== 200) refused.push(`${response.status()} ${response.url()}`);
    });
    await page.locator("#tasks tbody tr").first().waitFor();
    await page.getByRole("button", { name: "older →" }).click();
    await page.getByText("page 2").waitFor();
    await page.evaluate("location.hash = '#/tasks?task_type=crawl'");
    await page.getByText("page 1").waitFor();
    // Polled: a failed expect inside eventually throws at once, on the page still loading the new filter.
    await eventually(async () => (await page.locator("#tasks tbody tr").count()) === 15, 10_000, "the 15 crawl tasks");
    expect(refused).toEqual([]);
  });

  it("the Tasks page's filters cleared start at page 1 again, not at the page the list was left on before filtering", async () => {
    const tasks = await server.pool.enqueueMany(Array.from({ length: 30 }, (_, i) => ({ taskType: i % 2 ? "crawl" : "mail", params: {} })));
    // The newest of the type filtered out: on the unfiltered list's first page only.
    const newest = Math.max(...tasks.filter((t) => t.task.taskType === "mail").map((t) => t.task.id));
    const page = await open(server.keys.producer, "#/tasks");
    await page.locator(`#tasks tr[data-task="${newest}"]`).waitFor();
    await page.getByRole("button", { name: "older →" }).click();
    await page.getByText("page 2").waitFor();
    await page.selectOption('select[name="task_type"]', "crawl");
    await page.getByRole("button", { name: "Filter" }).click();
    await page.getByText("page 1").waitFor();
    await page.getByRole("link", { name: "clear" }).click();
    // The whole list from its newest task, as on opening the page: not page 2's tasks under the old cursor.
    await page.locator(`#tasks tr[data-task="${newest}"]`).waitFor({ timeout: 3000 });
    expect(await page.locator(".actions .muted").textContent()).toBe("page 1");
  });

  it("a finished task's page reads only its latest 500 events, and asks again rarely", async () => {
    const task = await server.pool.enqueue("crawl", {});
    const [lease] = await server.pool.protocol.claim({ workerId: "w1" });
    for (let page = 1; page <= 600; page++) await server.pool.protocol.checkpoint(lease.id, lease, { page });
    await server.pool.protocol.complete(lease.id, lease);
    const page = await open(server.keys.producer);
    const asked: string[] = [];
    await page.route((url) => url.pathname === `/api/tasks/${task.id}`, (route) => {
      asked.push(new URL(route.request().url()).search);
      return route.continue();
    });
    await page.evaluate(`location.hash = '#/tasks/${task.id}'`);
    await page.locator("h2", { hasText: "Timeline" }).waitFor();
    expect(await page.locator("h2", { hasText: "Timeline" }).textContent()).toBe("Timeline (the latest 500 events; earlier ones left out)");
    expect(await page.locator("#timeline strong").allTextContents()).toEqual(["checkpoint ×499", "completed"]);
    expect(await page.locator("h3", { hasText: "Checkpoint" }).textContent()).toBe("Checkpoint (499+ saved)");
    // Polled every 500 ms (the harness's interval) while it ran; finished, every 30 s. One more than it shows, to know whether there are more.
    await page.waitForTimeout(2500);
    expect(asked).toEqual(["?events_limit=501"]);
  });

  it("a task with exactly 500 events shows them all, not as the latest of more", async () => {
    const task = await server.pool.enqueue("crawl", {});
    const [lease] = await server.pool.protocol.claim({ workerId: "w1" });
    // Checkpoints up to 499 events, the completion the 500th.
    const page = 499 - (await server.pool.events(task.id)).length;
    for (let i = 1; i <= page; i++) await server.pool.protocol.checkpoint(lease.id, lease, { page: i });
    await server.pool.protocol.complete(lease.id, lease);
    const events = await server.pool.events(task.id);
    expect(events).toHaveLength(500);
    const tab = await open(server.keys.producer, `#/tasks/${task.id}`);
    await tab.locator("h2", { hasText: "Timeline" }).waitFor();
    // Asked for 500, exactly 500 came, and the page said "the latest 500 events" and "N+ saved".
    expect(await tab.locator("h2", { hasText: "Timeline" }).textContent()).toBe("Timeline (500 events)");
    expect(await tab.locator("h3", { hasText: "Checkpoint" }).textContent()).toBe(`Checkpoint (${page} saved)`);
    expect(await tab.locator("#timeline strong").first().textContent()).toBe(events[0].event);
  });

  it("a task with more events than shown says its checkpoints were all counted when its first claim is among those shown", async () => {
    const task = await server.pool.enqueue("crawl", {});
    const [lease] = await server.pool.protocol.claim({ workerId: "w1" });
    // 501 events: created, claimed, 498 checkpoints, completed. The one left out is the creation.
    for (let i = 1; i <= 498; i++) await server.pool.protocol.checkpoint(lease.id, lease, { page: i });
    await server.pool.protocol.complete(lease.id, lease);
    expect(await server.pool.events(task.id)).toHaveLength(501);
    const tab = await open(server.keys.producer, `#/tasks/${task.id}`);
    await tab.locator("h2", { hasText: "Timeline" }).waitFor();
    expect(await tab.locator("h2", { hasText: "Timeline" }).textContent()).toBe("Timeline (the latest 500 events; earlier ones left out)");
    expect(await tab.locator("h3", { hasText: "Checkpoint" }).textContent()).toBe("Checkpoint (498 saved)");
  });

  it("long names and an error of one long token stay within a phone's width", async () => {
    // A type name at its limit, a worker id near it, and an error that is one 3,000-character URL (no space to wrap at).
    const type = `t${"y".repeat(127)}`;
    const workerId = `w${"o".repeat(120)}`;
    const task = await server.pool.enqueue(type, { url: `https://example.com/${"a".repeat(3000)}` }, { maxAttempts: 1 });
    const [claimed] = await server.pool.protocol.claim({ workerId, taskTypes: [type], limit: 1 });
    await server.pool.protocol.fail(claimed.id, { workerId, leaseToken: claimed.leaseToken }, { error: `404 from https://example.com/${"b".repeat(3000)}`, retryable: false });
    const page = await open(server.keys.producer, `#/tasks/${task.id}`);
    await page.setViewportSize({ width: 390, height: 800 });
    const width = "({ page: document.documentElement.scrollWidth, view: innerWidth })";
    await page.locator("#task-error").waitFor({ timeout: 5000 });
    await page.locator("#timeline li.ev-failed").waitFor({ timeout: 5000 });
    expect(await page.evaluate(width)).toEqual({ page: 390, view: 390 });
    // The Tasks page's role picker lists the long type.
    await page.evaluate("location.hash = '#/tasks'");
    await page.locator("select[name=task_type] option", { hasText: type }).waitFor({ state: "attached", timeout: 5000 });
    expect(await page.evaluate(width)).toEqual({ page: 390, view: 390 });
  });

  it("the overview says when no coordinator sweeps, and who leads once one does", async () => {
    await server.close();
    server = await startDashboardServer("keys", false);
    const page = await open(server.keys.producer, "#/overview");
    await page.locator("#coordinator", { hasText: "Coordinator: none leads" }).waitFor();
    expect(await page.locator("#no-coordinator").count()).toBe(0); // an empty pool needs none yet

    await server.pool.enqueue("crawl", {});
    await shownOnPoll(page, page.locator("#no-coordinator", { hasText: "No coordinator has ever swept: dead workers are not detected" }));

    const coordinator = server.pool.coordinator({ ...COORDINATION, logger: silent });
    try {
      coordinator.start();
      await shownOnPoll(page, page.locator("#coordinator", { hasText: /Coordinator:\s+coordinator-\S+ leads\s+· last sweep [\d.]+ s ago/ }));
      await page.locator("#no-coordinator").waitFor({ state: "detached" });
    } finally {
      await coordinator.stop();
    }
  });

  it("the overview counts every reassignment of the last 15 minutes, not the last 10", async () => {
    await server.pool.protocol.workerHeartbeat({ workerId: "gone", roles: ["crawl"], capacity: 20, currentLoad: 0, tasksProcessed: 0 });
    await server.pool.enqueueMany(Array.from({ length: 12 }, () => ({ taskType: "crawl" })));
    expect(await server.pool.protocol.claim({ workerId: "gone", taskTypes: ["crawl"], limit: 12 })).toHaveLength(12);
    await server.handle.execute("UPDATE workers SET last_seen_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-1 hour')");
    expect((await server.pool.protocol.sweep({ staleAfterSeconds: 60, deadAfterSeconds: 120, reservationSeconds: 30 })).requeued).toHaveLength(12);
    const page = await open(server.keys.producer);
    await expect(page.locator("#recent-reassignments").textContent()).resolves.toMatch(/^12 reassignments in the last 15 minutes \(12 without a worker\)/);
  });

  it("the dead letter's latest failure is the group's last to fail, not its newest task", async () => {
    const [first, second] = await Promise.all([server.pool.enqueue("dl", {}, { maxAttempts: 1 }), server.pool.enqueue("dl", {}, { maxAttempts: 1 })]);
    for (const lease of await server.pool.protocol.claim({ workerId: "w1", limit: 2 })) await server.pool.protocol.fail(lease.id, lease, { error: "upstream 503" });
    // The newer task failed first: three hours ago (a delay or a backoff can hold a task for as long).
    await server.handle.execute(`UPDATE tasks SET completed_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-3 hours') WHERE id = ${second.id}`);
    expect(first.id).toBeLessThan(second.id);
    const page = await open(server.keys.producer, "#/dead-letter");
    const row = page.locator("#dead-letter tr.dead-group", { hasText: "upstream 503" });
    await row.waitFor();
    expect(await row.locator("td").nth(3).textContent()).toMatch(/^[\d.]+ s ago$/);
  });

  it("the dead letter is grouped by the server: its poll carries ids and errors, none of the failed tasks' params", async () => {
    // 20 failed tasks of 200 KB params each: the page read them whole, 4 MB a poll (178 MB at a thousand).
    const big = "p".repeat(200_000);
    await Promise.all(Array.from({ length: 20 }, () => server.pool.enqueue("dl", { big }, { maxAttempts: 1 })));
    for (const lease of await server.pool.protocol.claim({ workerId: "w1", limit: 20 })) await server.pool.protocol.fail(lease.id, lease, { error: "payload too large" });
    const polls: number[] = [];
    const page = await open(server.keys.producer, "#/dead-letter", async (p) =>
      p.on("response", (response) => {
        if (new URL(response.url()).pathname.startsWith("/api/tasks")) void response.body().then((body) => polls.push(body.length));
      }),
    );
    await page.locator("#dead-letter tr.dead-group", { hasText: "payload too large" }).getByText("20", { exact: true }).waitFor();
    expect(polls.length).toBeGreaterThan(0);
    expect(Math.max(...polls)).toBeLessThan(10_000);
  });

  it("an admin who retries a dead-letter group is told what it did, and what the server refused, after the row goes", async () => {
    await failDl("upstream 503", 3);
    const [raced] = await failDl("timeout", 2);
    const page = await open(server.keys.admin, "#/dead-letter");
    page.on("dialog", (dialog) => dialog.accept());
    const outcomes = page.locator("section.panel [role=status]");

    const row = page.locator("#dead-letter tr.dead-group", { hasText: "upstream 503" });
    await row.getByRole("button", { name: "Retry 3" }).click();
    // The reload finds the group's tasks pending: its row goes, and with it anything said there.
    await row.waitFor({ state: "detached" });
    expect(await outcomes.allTextContents()).toEqual(['Retried 3 dl tasks ("upstream 503"): back in the pool.']);

    // Someone else retried one first: the server's refusal is said, though the row goes as both are pending.
    await page.route((url) => url.pathname === `/api/tasks/${raced}/retry`, async (route) => {
      await server.pool.retry(raced);
      await route.continue();
    });
    const racedRow = page.locator("#dead-letter tr.dead-group", { hasText: "timeout" });
    await racedRow.getByRole("button", { name: "Retry 2" }).click();
    await racedRow.waitFor({ state: "detached" });
    expect(await outcomes.allTextContents()).toEqual([
      'Retried 3 dl tasks ("upstream 503"): back in the pool.',
      `Retried 1 of 2 dl tasks ("timeout"); 1 refused: #${raced}: Cannot retry task ${raced}: it is pending (only failed tasks can be retried)`,
    ]);
    expect((await server.pool.list({ status: "pending" })).tasks).toHaveLength(5);
  });

  it("a dead-letter group's Retry is disabled once confirmed: clicked again while its calls are slow, it asks and retries nothing twice", async () => {
    const ids = await failDl("timeout", 2);
    const page = await open(server.keys.admin, "#/dead-letter");
    const asked: string[] = [];
    page.on("dialog", (dialog) => {
      asked.push(dialog.message());
      return dialog.accept();
    });
    const held = await holdRetries(page);
    const row = page.locator("#dead-letter tr.dead-group", { hasText: "timeout" });
    const button = row.getByRole("button", { name: "Retry 2" });
    await button.click();
    await eventually(() => held.sent.length > 0, 10_000, "the first retry call");
    const disabled = await button.isDisabled();
    // Forced: Playwright would wait for the button to be enabled; a user's click on a disabled one does nothing.
    await button.click({ force: true });
    held.release();
    await row.waitFor({ state: "detached" });
    await page.waitForTimeout(500); // no second retry may follow
    expect(await page.locator("section.panel [role=status]").allTextContents()).toEqual(['Retried 2 dl tasks ("timeout"): back in the pool.']);
    expect(asked).toEqual(["Retry 2 failed dl task(s)? Leaving this page stops the retry."]);
    expect(held.sent.toSorted((a, b) => a - b)).toEqual(ids.toSorted((a, b) => a - b));
    expect(disabled).toBe(true);
  });

  it("a dead-letter group's retry stops when its page is left, even as a call's answer comes: the tasks it had not sent stay failed, and show there on coming back", async () => {
    const ids = await failDl("timeout", 5);
    const page = await open(server.keys.admin, "#/dead-letter");
    page.on("dialog", (dialog) => dialog.accept());
    // The page notes each retry call it sends, and when it is left; the first call's answer, once
    // here, is handed over in the very task that leaves the page, just after the route's render
    // (this listener runs after the app's): a user leaving as an answer arrives. An answer held at
    // the network instead comes a frame or more later, and hid a stop that came late.
    await page.evaluate(String.raw`(() => {
      const sent = (window.retriesSent = []);
      let leave = () => {};
      const left = new Promise((resolve) => (leave = resolve));
      addEventListener("hashchange", () => {
        sent.push("left");
        leave();
      });
      const fetch = window.fetch;
      window.fetch = async (path, init) => {
        const retry = /^api\/tasks\/(\d+)\/retry$/.exec(String(path));
        if (!retry) return fetch(path, init);
        sent.push(Number(retry[1]));
        const answer = await fetch(path, init);
        window.retryAnswered = true;
        await left;
        return answer;
      };
    })()`);
    await page.locator("#dead-letter tr.dead-group").getByRole("button", { name: "Retry 5" }).click();
    await eventually(() => page.evaluate("window.retryAnswered === true"), 10_000, "the first retry call's answer");
    await page.click('nav a[href="#/overview"]');
    await page.locator("#dead-letter").waitFor({ state: "detached" });
    await page.waitForTimeout(1000); // no further call may follow
    const sent = (await page.evaluate("window.retriesSent")) as (number | "left")[];
    const [first] = sent;
    expect(sent).toEqual([first, "left"]);
    expect(await server.pool.get(first as number)).toMatchObject({ status: "pending" });
    expect((await server.pool.list({ status: "failed" })).tasks.map((t) => t.id).sort((a, b) => a - b)).toEqual(ids.filter((id) => id !== first));
    await page.click('nav a[href="#/dead-letter"]');
    await page.locator("#dead-letter tr.dead-group").getByRole("button", { name: "Retry 4" }).waitFor();
  });

  it("a dead-letter group's progress counts the calls sent and the refusals, not every call as a task retried", async () => {
    const ids = await failDl("timeout", 3);
    const page = await open(server.keys.admin, "#/dead-letter");
    page.on("dialog", (dialog) => dialog.accept());
    // Someone else retries each task first; the third call waits, so the row shows its progress after two refusals.
    const held = await holdRetries(page, { from: 2, before: (id) => server.pool.retry(id) });
    const row = page.locator("#dead-letter tr.dead-group", { hasText: "timeout" });
    await row.getByRole("button", { name: "Retry 3" }).click();
    await eventually(() => held.sent.length === 3, 10_000, "the third retry call");
    await expect.poll(() => row.locator("td:last-child span.small").textContent()).toBe("2 of 3 sent, 2 refused");
    held.release();
    await row.waitFor({ state: "detached" });
    expect(await page.locator("section.panel [role=status]").textContent()).toMatch(/^Retried 0 of 3 dl tasks \("timeout"\); 3 refused: /);
    expect(held.sent.toSorted((a, b) => a - b)).toEqual(ids.toSorted((a, b) => a - b));
  });

  it("the Tasks page's role picker shows the role filtered on, even one with no task yet (a link from Capacity)", async () => {
    await server.pool.enqueue("crawl", {});
    const page = await open(server.keys.producer, "#/tasks?task_type=registered_only");
    await page.locator("#tasks, p.muted", { hasText: /No task|crawl/ }).first().waitFor();
    await expect.poll(() => page.locator("select[name=task_type]").inputValue()).toBe("registered_only");
  });

  it("a malformed escape in the address (a typed %) shows a page, not a blank one", async () => {
    const page = await open(server.keys.producer, "#/tasks/100%");
    await page.locator(".alert", { hasText: "id" }).waitFor();
    await page.evaluate("location.hash = '#/workers/%zz'");
    await page.locator("h2", { hasText: "Workers" }).first().waitFor();
  });

  it("an error the header shows goes with the page whose poll met it", async () => {
    const page = await open(server.keys.producer, "#/workers");
    await page.locator("#live", { hasText: "live" }).waitFor();
    await page.route((url) => url.pathname === "/api/workers", (route) => route.abort());
    await page.locator("#live", { hasText: "The server cannot be reached" }).waitFor();
    // A page that polls nothing: no answer would ever clear the error.
    await page.evaluate("location.hash = '#/no-such-page'");
    await page.locator(".alert", { hasText: 'No page "no-such-page"' }).waitFor();
    await expect.poll(() => page.locator("#live").textContent(), { timeout: 2000 }).toMatch(/^live · updated/);

    // Nor does a request still out when its page is left, failing after.
    let asked = () => {};
    let fail = () => {};
    const out = new Promise<void>((resolve) => (asked = resolve));
    const failing = new Promise<void>((resolve) => (fail = resolve));
    await page.route((url) => url.pathname === "/api/workers", async (route) => {
      asked();
      await failing;
      await route.abort();
    });
    await page.evaluate("location.hash = '#/workers'");
    await out;
    await page.evaluate("location.hash = '#/no-such-page'");
    const failed = page.waitForEvent("requestfailed");
    fail();
    await failed;
    await page.waitForTimeout(200); // for the page to hear it
    expect(await page.locator("#live").textContent()).toMatch(/^live · updated/);
  });

  it("the header says when the server has taken a request and not answered it, rather than 'live' (a server stopped, or cut off)", async () => {
    const page = await open(server.keys.producer, "#/workers", (p) => p.clock.install());
    await page.locator("#live", { hasText: "live · updated" }).waitFor();
    // Held as a stopped server (SIGSTOP) or a lost network holds it: the fetch waits for minutes.
    let asked = () => {};
    const out = new Promise<void>((resolve) => (asked = resolve));
    let answer = () => {};
    const held = new Promise<void>((resolve) => (answer = resolve));
    await page.route((url) => url.pathname === "/api/workers", async (route) => {
      asked();
      await held;
      await route.continue();
    });
    try {
      // Five poll periods (2.5 s at the harness's 500 ms) without an answer, on the page's clock moved on past them.
      await out;
      await page.clock.fastForward(3000);
      // 15 s: a full suite's load on two cores once kept the header's next render past 5 s.
      await page.locator("#live", { hasText: /^⚠ waiting \d+(\.\d)? s for the server to answer; last answer \d+(\.\d)? s ago$/ }).waitFor({ timeout: 15_000 });
      // The request still out when its page is left holds the header no more.
      await page.evaluate("location.hash = '#/capacity'");
      await page.locator("#live", { hasText: /^live · updated/ }).waitFor({ timeout: 2000 });
    } finally {
      answer();
    }
  });

  it("a server that takes the first request and does not answer it is said to, rather than 'Connecting…' for good; the dashboard opens when it answers", async () => {
    const page = await open(server.keys.producer, "#/overview", (p) => p.clock.install());
    await page.locator("#live", { hasText: /^live · updated/ }).waitFor();
    // Opened again with its key kept: the first call, the key's check, is held as a stopped server holds it.
    let asked = () => {};
    const out = new Promise<void>((resolve) => (asked = resolve));
    let answer = () => {};
    const held = new Promise<void>((resolve) => (answer = resolve));
    await page.route((url) => url.pathname === "/api/whoami", async (route) => {
      asked();
      await held;
      await route.continue();
    });
    await page.reload();
    try {
      // Five poll periods, on the page's clock moved on past them.
      await out;
      await page.clock.fastForward(3000);
      await page.getByRole("alert").filter({ hasText: /^⚠ waiting \d+(\.\d)? s for the server to answer: it may be stopped, or cut off by the network/ }).waitFor({ timeout: 5000 });
    } finally {
      answer();
    }
    await page.locator("#live", { hasText: /^live · updated/ }).waitFor({ timeout: 5000 });
  });

  it("the key's check answered 503 with retry_after waits that long, saying until when, and checks it again by itself", async () => {
    const page = await open(server.keys.producer);
    await page.locator("#live", { hasText: /^live · updated/ }).waitFor();
    const asked: number[] = [];
    page.on("request", (request) => {
      if (new URL(request.url()).pathname === "/api/whoami") asked.push(Date.now());
    });
    // Opened again with its key kept: the check meets a server whose database is out of reach for a while.
    const unavailable = { success: false, error: "database_unavailable", message: "The database cannot be reached", retry_after: 2 };
    await page.route((url) => url.pathname === "/api/whoami", (route) => route.fulfill({ status: 503, contentType: "application/json", body: JSON.stringify(unavailable) }), { times: 1 });
    await page.reload();
    await page.getByRole("alert").filter({ hasText: "The server did not answer as expected: The database cannot be reached" }).waitFor({ timeout: 5000 });
    await page.locator("#retry-wait", { hasText: /^Waiting until \d{1,2}:\d{2}:\d{2}.* \(\d+(\.\d)? s\), as the server asked; the key is checked again then\.$/ }).waitFor();
    // No "Try again" to send it sooner: it would only be refused again.
    expect(await page.getByRole("button", { name: "Try again" }).count()).toBe(0);
    await page.locator("#live", { hasText: /^live · updated/ }).waitFor({ timeout: 5000 });
    expect(asked).toHaveLength(2);
    expect(asked[1] - asked[0]).toBeGreaterThanOrEqual(1950);
  });

  it("a key entered again while the polls wait out a 503's retry_after is checked once that wait is over, not refused meanwhile", async () => {
    const page = await open(server.keys.producer, "#/workers");
    await page.locator("#live", { hasText: /^live · updated/ }).waitFor();
    const asked: number[] = [];
    page.on("request", (request) => {
      if (new URL(request.url()).pathname === "/api/whoami") asked.push(Date.now());
    });
    const unavailable = { success: false, error: "database_unavailable", message: "The database cannot be reached", retry_after: 3 };
    await page.route((url) => url.pathname === "/api/workers", (route) => route.fulfill({ status: 503, contentType: "application/json", body: JSON.stringify(unavailable) }), { times: 1 });
    await page.locator("#live", { hasText: /waiting until .*, as the server asked$/ }).waitFor({ timeout: 5000 });
    const refusedAt = Date.now();
    // The operator forgets the key and enters it again during the wait.
    await page.getByRole("button", { name: "Forget key" }).click();
    await page.fill("#api-key", server.keys.producer);
    await page.click("button[type=submit]");
    await page.locator("#retry-wait", { hasText: /^Waiting until .*, as the server asked; the key is checked again then\.$/ }).waitFor({ timeout: 5000 });
    await expect(page.getByRole("alert").textContent()).resolves.toBe("The server asked for a wait: The database cannot be reached");
    await page.locator("#live", { hasText: /^live · updated/ }).waitFor({ timeout: 10_000 });
    expect(asked).toHaveLength(1);
    expect(asked[0] - refusedAt).toBeGreaterThanOrEqual(2000);
  });

  it("a wrong key, and a worker's key, get a clear message and no data", async () => {
    const page = await open("tp_not-a-real-key-at-all");
    await page.locator("#key-message", { hasText: 'Wrong API key: the server answered "Invalid or revoked API key"' }).waitFor();
    await expect(page.evaluate(() => localStorage.getItem("taskpool.apiKey"))).resolves.toBeNull();

    await page.fill("#api-key", server.keys.worker);
    await page.click("button[type=submit]");
    await page.locator("#key-message", { hasText: "This key's scope is worker" }).waitFor();

    await page.fill("#api-key", server.keys.producer);
    await page.click("button[type=submit]");
    await page.locator("#scope").getByText("(producer)").waitFor();
    await expect(page.locator("#live").textContent()).resolves.toMatch(/live/);
  });

  it("shows what users wrote as text, under a Content-Security-Policy the page keeps to, and cannot be framed", async () => {
    // What any producer or worker key may write, shown on every page: it must never become markup or run.
    const evil = "<img src=x onerror=window.__xss=1><script>window.__xss=2</script>"; // no quotes: the same text in JSON
    const failed = await server.pool.enqueue("xss", { [evil]: evil }, { concurrencyKey: evil, uniqueKey: `u${evil}` });
    await server.pool.protocol.workerHeartbeat({ workerId: "evil", roles: ["xss"], hostname: evil, version: "<b>v1</b>", capacity: 2, currentLoad: 0, tasksProcessed: 0, metadata: { [evil]: evil } });
    const [claimed] = await server.pool.protocol.claim({ workerId: "evil", taskTypes: ["xss"], limit: 1 });
    const lease = { workerId: "evil", leaseToken: claimed.leaseToken };
    await server.pool.protocol.checkpoint(claimed.id, lease, { at: evil });
    await server.pool.protocol.fail(claimed.id, lease, { error: evil, retryable: false });
    const done = await server.pool.enqueue("xss", {});
    const [second] = await server.pool.protocol.claim({ workerId: "evil", taskTypes: ["xss"], limit: 1 });
    await server.pool.protocol.complete(second.id, { workerId: "evil", leaseToken: second.leaseToken }, { result: { said: evil } });
    const cancelled = await server.pool.enqueue("xss", {});
    await server.pool.cancel(cancelled.id, { reason: evil });

    const answer = await fetch(`${server.url}/`);
    await answer.text();
    expect(answer.headers.get("content-security-policy")).toMatch(/^default-src 'none'; script-src 'self' 'sha256-[A-Za-z0-9+/]+=*';.* frame-ancestors 'none'$/);
    expect(answer.headers.get("x-content-type-options")).toBe("nosniff");
    expect(answer.headers.get("x-frame-options")).toBe("DENY");

    const page = await browser.newPage();
    pages.push(page);
    // In the page (this file has no DOM types): every violation of the policy, and what the payloads would set if they ran.
    await page.addInitScript("window.__violations = []; document.addEventListener('securitypolicyviolation', (e) => __violations.push(e.violatedDirective + ' ' + e.blockedURI));");
    const probe = "({ xss: window.__xss ?? null, markup: document.querySelectorAll('img, b, #app script').length, violations: window.__violations })";
    await page.goto(`${server.url}/?interval=500#/overview`);
    await page.fill("#api-key", server.keys.admin);
    await page.click("button[type=submit]");
    const visits = ["workers?worker=evil", "tasks", `tasks/${failed.id}`, `tasks/${done.id}`, `tasks/${cancelled.id}`, "dead-letter", "overview"];
    for (const hash of visits) {
      await page.goto(`${server.url}/?interval=500#/${hash}`);
      await page.locator("#live", { hasText: "live" }).waitFor({ timeout: 5000 });
      if (hash !== "overview") await page.getByText(evil).first().waitFor({ timeout: 5000 });
      expect(await page.evaluate(probe), hash).toEqual({ xss: null, markup: 0, violations: [] });
    }

    // Another site framing the page (to have an admin click Cancel unawares) gets an error page instead.
    const framing = await browser.newPage();
    pages.push(framing);
    await framing.setContent(`<iframe src="${server.url}/"></iframe>`);
    await expect.poll(() => framing.frames()[1]?.url(), { timeout: 5000 }).toMatch(/^chrome-error:/);
  });

  it("the API reference at /docs renders under its own Content-Security-Policy, and cannot be framed either", async () => {
    const answer = await fetch(`${server.url}/docs/`);
    expect(answer.headers.get("content-security-policy")).toMatch(/frame-ancestors 'none'/);
    expect(answer.headers.get("content-security-policy")).not.toMatch(/upgrade-insecure-requests/);
    // Nothing from another site: not even the validator badge's host, which the UI does not call.
    expect(answer.headers.get("content-security-policy")).not.toMatch(/https:|validator\.swagger\.io/);
    expect(answer.headers.get("x-frame-options")).toBe("DENY");
    const page = await browser.newPage();
    pages.push(page);
    const violations: string[] = [];
    page.on("console", (m) => m.text().includes("Content Security Policy") && violations.push(m.text()));
    await page.goto(`${server.url}/docs/`);
    // Swagger UI is a 1.7 MB script: under load (30 on 2 cores) chromium took over 10 s to render it once.
    await page.locator(".swagger-ui .info .title", { hasText: "taskpool" }).waitFor({ timeout: 20_000 });
    await page.locator(".opblock-summary-path", { hasText: "/api/tasks/claim" }).first().waitFor();
    expect(violations).toEqual([]);
    const framing = await browser.newPage();
    pages.push(framing);
    await framing.setContent(`<iframe src="${server.url}/docs/"></iframe>`);
    await expect.poll(() => framing.frames()[1]?.url(), { timeout: 5000 }).toMatch(/^chrome-error:/);
  });

  it("a server without auth asks for no key; its schedules are listed and paused from the page", async () => {
    await server.close();
    server = await startDashboardServer("none");
    await server.pool.schedule({ name: "nightly_resync", taskType: "product_resync", cron: "0 3 * * *" });
    const page = await open(null, "#/overview");
    await page.locator("#scope").getByText("no auth").waitFor();
    expect(await page.locator("#api-key").count()).toBe(0);
    await page.click('nav a[href="#/schedules"]');
    const row = page.locator("#schedules tbody tr", { hasText: "nightly_resync" });
    await row.getByText("running").waitFor();
    await row.getByRole("button", { name: "pause" }).click();
    await row.getByText("paused").waitFor();
    expect(await server.pool.schedules.get("nightly_resync")).toMatchObject({ enabled: false, nextRunAt: null });
  });

  it("the Schedules page stays listed, and its link opens it, when the call that looks for it is refused for a while (a 429)", async () => {
    const page = await open(server.keys.producer, "#/schedules", (p) =>
      p.route(
        (url) => url.pathname === "/api/schedules",
        (route) => route.fulfill({ status: 429, contentType: "application/json", body: JSON.stringify({ success: false, error: "rate_limited", message: "Rate limit exceeded", retry_after: 1 }) }),
        { times: 1 },
      ),
    );
    await page.locator("#schedules").waitFor({ timeout: 5000 });
    expect(await page.locator('nav a[href="#/schedules"]').count()).toBe(1);
  });

  it("the schedules table fits the page at 1280 px with long names and a long last result, cut with the whole of it at hand", async () => {
    const name = `s${"c".repeat(127)}`;
    const taskType = `t${"y".repeat(127)}`;
    await server.pool.schedule({ name, taskType, cron: "0 3 * * *", timezone: "America/Argentina/ComodRivadavia" });
    // What a failed run leaves: words, and one long token (a URL) with no space to wrap at.
    const error = `Run failed: the params the schedule gives were refused by the task type's schema; see https://example.com/${"a".repeat(600)} for the ${"details ".repeat(60)}end`;
    const page = await open(server.keys.admin, "#/schedules", (p) =>
      p.route((url) => url.pathname === "/api/schedules", async (route) => {
        const response = await route.fetch();
        const body = await response.json();
        for (const s of body.schedules) s.last_result = { tick_at: s.created_at, fired_at: s.created_at, tasks_created: 0, skipped_ticks: 0, message: "failed", error };
        await route.fulfill({ response, json: body });
      }),
    );
    // Without the wrapping the table was 11,086 px wide in its 1,221.
    await fitsCut(page, "#schedules", page.locator("#schedules tbody tr td.status-failed"), error);
  });

  it("the Tasks and Reassignments tables fit the page at 1280 px with the longest type and worker names, a long error and a long reason, cut with the whole of it at hand", async () => {
    // Words, and one long token (a URL) with no space to wrap at: what a worker's error or a release's reason can hold.
    const long = (what: string) => `${what}: see https://example.com/${"a".repeat(600)} for the ${"details ".repeat(60)}end`;
    const error = long("404 from the store's API");
    const reason = long("Released by its worker");
    // The longest names there can be, with nowhere to wrap but where the cell says it may.
    const taskType = `crawl_${"x".repeat(122)}`;
    const workerId = `worker-${"y".repeat(121)}`;
    const task = await server.pool.enqueue(taskType, {}, { maxAttempts: 1 });
    const [claimed] = await server.pool.protocol.claim({ workerId, limit: 1 });
    await server.pool.protocol.fail(claimed.id, { workerId, leaseToken: claimed.leaseToken }, { error, retryable: false });
    await server.handle.execute(`INSERT INTO reassignment_events (task_id, from_worker_id, to_worker_id, reason, checkpoint, success, error_message, created_at)
      VALUES (${task.id}, '${workerId}', '${workerId}', '${reason.replaceAll("'", "''")}', NULL, 0, '${error.replaceAll("'", "''")}', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))`);
    const cell = (page: Page, table: string, n: number) => page.locator(`${table} tbody tr`).first().locator("td").nth(n);
    const page = await open(server.keys.producer, "#/tasks");
    await fitsCut(page, "#tasks", cell(page, "#tasks", 8), error);
    await page.evaluate("location.hash = '#/reassignments'");
    await fitsCut(page, "#reassignments", cell(page, "#reassignments", 4), reason);
    await fitsCut(page, "#reassignments", cell(page, "#reassignments", 5), error);
    // The dead letter's Retry buttons went 19,000 px off-screen behind one long error, every group's.
    await page.evaluate("location.hash = '#/dead-letter'");
    // The server answers a group's error cut at 1,000 characters; the page says so.
    await fitsCut(page, "#dead-letter", cell(page, "#dead-letter", 1), `${error.slice(0, FAILURE_MESSAGE_SHOWN)}… (the whole error is on each task's page)`);
    // The figures went off-screen behind one long role or worker name.
    await server.pool.protocol.workerHeartbeat({ workerId, roles: [taskType], capacity: 1, currentLoad: 0, tasksProcessed: 0 });
    const fits = async (hash: string, table: string) => {
      await page.evaluate(`location.hash = '${hash}'`);
      await page.locator(`${table} tbody tr`).first().waitFor();
      const box = await page.locator(table).evaluate((t) => ({ scroll: t.parentElement!.scrollWidth, client: t.parentElement!.clientWidth }));
      expect(box.scroll, hash).toBeLessThanOrEqual(box.client);
      expect(await page.evaluate("document.documentElement.scrollWidth")).toBe(1280);
    };
    await fits("#/workers", "#workers");
    await fits("#/capacity", "#capacity");
    await fits("#/overview", "#counts-by-role");
  });

  it("an ?interval= past what a timer can wait is taken as 10 minutes, not as at once (hundreds of polls a second)", async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    pages.push(page);
    let calls = 0;
    page.on("request", (request) => void (new URL(request.url()).pathname.startsWith("/api/") && calls++));
    await page.goto(`${server.url}/?interval=Infinity#/capacity`);
    await page.fill("#api-key", server.keys.producer);
    await page.click("button[type=submit]");
    await page.locator("#capacity").waitFor();
    const settled = calls;
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect(calls - settled).toBeLessThan(5);
  });

  it("a keyboard opens a worker's tasks, a role's tasks from the overview, and a cut-off text", async () => {
    const task = await server.pool.enqueue("kbd", {});
    const [lease] = await server.pool.protocol.claim({ workerId: "kbd-worker", taskTypes: ["kbd"], limit: 1 });
    const beat = () => server.pool.protocol.workerHeartbeat({ workerId: "kbd-worker", roles: ["kbd"], capacity: 1, currentLoad: 1, tasksProcessed: 0, leases: [{ taskId: lease.id, leaseToken: lease.leaseToken }] });
    await beat();
    // Alive until its task fails below: silent for the coordinator's 2 s dead-after (a slow run of the
    // steps between, under a loaded host), it was declared dead and its task taken back.
    const beating = setInterval(() => void beat().catch(() => {}), 300);
    onTestFinished(() => clearInterval(beating));
    const page = await open(server.keys.producer, "#/workers");
    const row = page.locator('#workers tr[data-worker="kbd-worker"]');
    await row.focus();
    await page.keyboard.press("Enter");
    await page.locator(`#workers a[href="#/tasks/${task.id}"]`).waitFor();
    expect(await row.getAttribute("aria-expanded")).toBe("true");
    await page.evaluate("location.hash = '#/overview'");
    const role = page.locator('#counts-by-role a[href="#/tasks?task_type=kbd"]');
    await shownOnPoll(page, role);
    await role.focus();
    await page.keyboard.press("Enter");
    await page.waitForFunction("location.hash === '#/tasks?task_type=kbd'");
    await server.pool.protocol.fail(lease.id, lease, { error: `${"a long error ".repeat(80)}end`, retryable: false });
    clearInterval(beating);
    await page.evaluate("location.hash = '#/tasks?status=failed&task_type=kbd'");
    const clamp = page.locator("#tasks .clamp").first();
    await clamp.waitFor();
    await clamp.focus();
    await page.keyboard.press("Enter");
    expect(await clamp.getAttribute("aria-expanded")).toBe("true");
  });

  it("an admin cancels a schedule's pending tasks from the page and is told how many; a refusal shows the server's message", async () => {
    // Every second, three keys in hourly batches: the first run's tasks stay pending (no worker), and the unique key makes later runs add none.
    await server.pool.schedule({ name: "resync", taskType: "product_resync", cron: "* * * * * *", fanOut: { keys: [1, 2, 3], batches: 3, batchIntervalSeconds: 3600 }, uniqueKey: "resync:{key}" });
    await eventually(async () => (await server.pool.schedules.get("resync"))?.lastRunAt != null, 10_000, "the schedule to run");
    const page = await open(server.keys.admin, "#/schedules");
    const row = page.locator("#schedules tbody tr", { hasText: "resync" });
    await row.getByText("running").waitFor();
    const cancelPending = row.getByRole("button", { name: "cancel pending" });
    expect(await cancelPending.count()).toBe(1);
    const asked: string[] = [];
    let accept = false;
    page.on("dialog", (dialog) => {
      asked.push(dialog.message());
      return accept ? dialog.accept() : dialog.dismiss();
    });
    // Still running, it is said that its next run makes more; declined, nothing is cancelled.
    await cancelPending.click();
    await expect.poll(() => asked).toEqual(["Cancel the tasks of schedule resync that are still pending? Tasks workers hold run on. It is running: pause it first, or its next run makes more."]);
    expect((await server.pool.list({ status: "pending" })).tasks).toHaveLength(3);

    await row.getByRole("button", { name: "pause" }).click();
    await row.getByText("paused").waitFor();
    accept = true;
    await cancelPending.click();
    await row.getByRole("status").getByText("Cancelled 3 pending tasks").waitFor();
    expect(asked.at(-1)).toBe("Cancel the tasks of schedule resync that are still pending? Tasks workers hold run on.");
    expect((await server.pool.list({ status: "cancelled" })).tasks).toHaveLength(3);

    // A key that may read but not act (as if the admin key had been swapped for a producer's): the server's 403, as it said it.
    await page.route((url) => url.pathname === "/api/schedules/resync/cancel-pending", (route) => route.continue({ headers: { ...route.request().headers(), "x-api-key": server.keys.producer } }));
    await cancelPending.click();
    await row.getByRole("status").getByText("This API key's scope is producer; POST /api/schedules/:name/cancel-pending needs admin").waitFor();
    await page.unroute((url) => url.pathname === "/api/schedules/resync/cancel-pending");
    // Resumed, its runs make pending tasks again: what the cancel did is no longer said beside it.
    await row.getByRole("button", { name: "resume" }).click();
    await row.getByText("running").waitFor();
    await row.getByRole("status").waitFor({ state: "detached" });
  });
});
