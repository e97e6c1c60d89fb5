import { describe, expect, it } from "vitest";
import { nextRunAfter, planTick } from "../src/core/schedule.js";

/** The ticks strictly after `from` up to `until`, as a schedule meets them one after another. */
function ticks(cron: string, timezone: string, from: string, until: string): string[] {
  const seen: string[] = [];
  for (let t = nextRunAfter(cron, timezone, new Date(from)); t !== null && t <= new Date(until); t = nextRunAfter(cron, timezone, t)) seen.push(t.toISOString());
  return seen;
}

describe("cron ticks across daylight saving time", () => {
  // Europe/Berlin: 2026-10-25 03:00 CEST becomes 02:00 CET (01:00Z); 2026-03-29 02:00 CET becomes 03:00 CEST (01:00Z).
  it("fires a repeated wall-clock time once, at its first occurrence, for hours in a list as for a single hour", () => {
    // croner fired 02:00 at 00:00Z and again at 01:00Z: a fan-out's every key twice.
    expect(ticks("0 2,14 * * *", "Europe/Berlin", "2026-10-24T23:00:00Z", "2026-10-25T23:00:00Z")).toEqual(["2026-10-25T00:00:00.000Z", "2026-10-25T13:00:00.000Z"]);
    expect(ticks("0 2 * * *", "Europe/Berlin", "2026-10-24T23:00:00Z", "2026-10-25T23:00:00Z")).toEqual(["2026-10-25T00:00:00.000Z"]);
    expect(ticks("0,30 1-2 * * *", "America/New_York", "2026-11-01T04:00:00Z", "2026-11-01T12:00:00Z")).toEqual([
      "2026-11-01T05:00:00.000Z",
      "2026-11-01T05:30:00.000Z",
      // 01:00 and 01:30 EST (06:00Z, 06:30Z) repeat EDT's: passed over.
      "2026-11-01T07:00:00.000Z",
      "2026-11-01T07:30:00.000Z",
    ]);
  });

  it("fires a skipped wall-clock time as the skip ends, for hours in a list as for a single hour", () => {
    // croner dropped the list's 02:00 that day, and moved the single hour's to 03:00 CEST.
    expect(ticks("0 2,14 * * *", "Europe/Berlin", "2026-03-28T23:00:00Z", "2026-03-29T23:00:00Z")).toEqual(["2026-03-29T01:00:00.000Z", "2026-03-29T12:00:00.000Z"]);
    expect(ticks("0 2 * * *", "Europe/Berlin", "2026-03-28T23:00:00Z", "2026-03-29T23:00:00Z")).toEqual(["2026-03-29T01:00:00.000Z"]);
    expect(ticks("30 2 * * *", "America/New_York", "2026-03-08T05:00:00Z", "2026-03-09T05:00:00Z")).toEqual(["2026-03-08T07:00:00.000Z"]);
  });

  it("runs an hour field with a * by the clock: both of a repeated hour, none of a skipped one", () => {
    expect(ticks("0 * * * *", "Europe/Berlin", "2026-10-24T23:30:00Z", "2026-10-25T02:30:00Z")).toEqual([
      "2026-10-25T00:00:00.000Z",
      "2026-10-25T01:00:00.000Z",
      "2026-10-25T02:00:00.000Z",
    ]);
    expect(ticks("0 * * * *", "Europe/Berlin", "2026-03-28T23:30:00Z", "2026-03-29T02:30:00Z")).toEqual([
      "2026-03-29T00:00:00.000Z",
      "2026-03-29T01:00:00.000Z",
      "2026-03-29T02:00:00.000Z",
    ]);
  });

  it("reads a nickname's hours: @daily's midnight is fixed, @hourly's by the clock", () => {
    // America/Santiago skips its midnight on 2026-09-06 (00:00 -04 becomes 01:00 -03, 04:00Z).
    expect(ticks("@daily", "America/Santiago", "2026-09-05T12:00:00Z", "2026-09-06T12:00:00Z")).toEqual(["2026-09-06T04:00:00.000Z"]);
    expect(ticks("@hourly", "Europe/Berlin", "2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z")).toEqual(["2026-10-25T01:00:00.000Z"]);
  });

  it("leaves other days and zones as they were", () => {
    expect(ticks("0 2,14 * * *", "Europe/Berlin", "2026-07-01T00:00:00Z", "2026-07-02T23:00:00Z")).toEqual([
      "2026-07-01T12:00:00.000Z",
      "2026-07-02T00:00:00.000Z",
      "2026-07-02T12:00:00.000Z",
    ]);
    expect(ticks("15 9 * * 1-5", "UTC", "2026-10-23T00:00:00Z", "2026-10-27T00:00:00Z")).toEqual(["2026-10-23T09:15:00.000Z", "2026-10-26T09:15:00.000Z"]);
  });

  it("plans a pass from the tick a schedule meets, not the repeat: a pass after the repeat fires nothing more", () => {
    const schedule = { cron: "0 2,14 * * *", timezone: "Europe/Berlin", missedTicks: "skip" as const };
    // Due at the first 02:00, passed at 01:00:05Z (the repeat): it fires the first, next at 14:00.
    expect(planTick({ ...schedule, nextRunAt: new Date("2026-10-25T00:00:00Z") }, new Date("2026-10-25T00:00:05Z"), 60_000)).toMatchObject({
      tickAt: new Date("2026-10-25T00:00:00Z"),
      skippedTicks: 0,
      nextRunAt: new Date("2026-10-25T13:00:00Z"),
    });
    // On the spring day, due at the skip's end: that tick fires.
    expect(planTick({ ...schedule, nextRunAt: new Date("2026-03-29T01:00:00Z") }, new Date("2026-03-29T01:00:02Z"), 60_000)).toMatchObject({
      tickAt: new Date("2026-03-29T01:00:00Z"),
      nextRunAt: new Date("2026-03-29T12:00:00Z"),
    });
  });
});
