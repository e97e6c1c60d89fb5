import { describe, expect, it } from "vitest";
import { retryDelayMs } from "../src/core/backoff.js";
import { InvalidTransitionError } from "../src/core/errors.js";
import { inexactInteger } from "../src/core/exact-integers.js";
import { compileParamsSchema } from "../src/core/params-schema.js";
import { assertCanPerform, canPerform, TRANSITIONS } from "../src/core/state-machine.js";
import { TASK_STATUSES } from "../src/core/task.js";

describe("state machine", () => {
  it("allows exactly the transitions of the lifecycle", () => {
    const allowed = Object.fromEntries(
      Object.keys(TRANSITIONS).map((action) => [action, TASK_STATUSES.filter((s) => canPerform(action as keyof typeof TRANSITIONS, s))]),
    );
    expect(allowed).toEqual({
      claim: ["pending"],
      start: ["claimed"],
      heartbeat: ["claimed", "running"],
      checkpoint: ["claimed", "running"],
      progress: ["claimed", "running"],
      complete: ["claimed", "running"],
      fail: ["claimed", "running"],
      release: ["claimed", "running"],
      recover: ["claimed", "running"],
      cancel: ["pending", "claimed", "running"],
      retry: ["failed"],
      reserve: ["pending"],
    });
  });

  it("never leaves a terminal status except by manual retry of a failure", () => {
    for (const [action, { from }] of Object.entries(TRANSITIONS)) {
      const terminal = (from as readonly string[]).filter((s) => ["completed", "failed", "cancelled"].includes(s));
      expect(terminal).toEqual(action === "retry" ? ["failed"] : []);
    }
  });

  it("throws a typed error naming the task, action and status", () => {
    expect(() => assertCanPerform("complete", "pending", 7)).toThrow(InvalidTransitionError);
    expect(() => assertCanPerform("complete", "pending", 7)).toThrow("Cannot complete task 7: it is pending");
  });
});

describe("retry backoff", () => {
  const policy = { baseSeconds: 2, factor: 3, maxSeconds: 60, jitter: 0.5 };
  it("grows exponentially up to the cap", () => {
    expect([1, 2, 3, 4, 5].map((a) => retryDelayMs(policy, a, () => 0))).toEqual([2000, 6000, 18000, 54000, 60000]);
  });
  it("jitters downwards by at most the jitter fraction", () => {
    expect(retryDelayMs(policy, 1, () => 0.999999)).toBe(1000);
    expect(retryDelayMs({ ...policy, jitter: 0 }, 1, () => 0.9)).toBe(2000);
  });
});

describe("integers JSON numbers cannot hold exactly", () => {
  const check = (text: string, root = "") => inexactInteger(text, JSON.parse(text), root);

  it("refuses one beyond 2^53 − 1, naming where it is and what it would become", () => {
    expect(check('{"order":{"ids":[1,12345678901234567890]}}', "params")).toBe(
      "params.order.ids.1: 12345678901234567890 is an integer beyond ±9007199254740991, the largest a JSON number keeps exactly here; it would be stored as 12345678901234567000: send it as a string",
    );
    expect(check('{"n":-9007199254740993}')).toMatch(/^n: -9007199254740993 is an integer beyond/);
    expect(check("[9007199254740992]")).toMatch(/^0: 9007199254740992 /);
    // One that happens to be kept is refused alike, without saying it would change.
    expect(check('{"n":10000000000000000000}')).toBe("n: 10000000000000000000 is an integer beyond ±9007199254740991, the largest a JSON number keeps exactly here: send it as a string");
    // Found however deep: the body's depth is checked after this.
    const deep = `${"[".repeat(100_000)}12345678901234567890${"]".repeat(100_000)}`;
    expect(check(deep)).toMatch(/^0(\.0){99999}: 12345678901234567890 is an integer beyond/);
  });

  it("passes what is kept exactly, and what was written as an approximation", () => {
    for (const text of [
      '{"n":9007199254740991,"m":-9007199254740991}',
      '{"id":"12345678901234567890"}', // a string, as advised
      '{"x":"a \\" 12345678901234567890"}', // digits inside a string with an escaped quote
      '{"f":1234567890123456789.5}',
      '{"f":0.12345678901234567890}',
      '{"e":1e12345678901234567}',
      '{"e":1E-12345678901234567}',
      '{"e":12345678901234567890e0}',
    ]) {
      expect(check(text), text).toBeNull();
    }
  });
});

describe("params schema patterns on RE2", () => {
  it("match what JavaScript's engine matches, for the escapes and classes the two spell or read differently", () => {
    const cases: [string, string[]][] = [
      ["^\\uD83D\\uDE00$", ["😀", "x"]], // a surrogate pair's two escapes: one code point
      ["^[\\u0400-\\u04FF]+$", ["Москва", "Moscow"]],
      ["^\\u{1F600}$", ["😀", "x"]],
      ["^\\S+$", ["a\u00a0b", "ab", "a b"]], // JavaScript's \s is Unicode whitespace
      ["^\\s$", ["\u2028", "\u000b", " ", "x"]],
      ["^[\\s,]+$", ["\u00a0,", "a"]],
      ["^a.b$", ["a\rb", "a\u2028b", "a\nb", "axb"]], // . stops at every line terminator
      ["^[.]$", [".", "x"]],
      ["^\\\\u0041$", ["\\u0041", "A"]], // an escaped backslash before a u stays one
    ];
    for (const [pattern, texts] of cases) {
      const validate = compileParamsSchema({ type: "object", properties: { v: { type: "string", pattern } } }, "t");
      for (const text of texts) expect(validate({ v: text }), `${pattern} on ${JSON.stringify(text)}`).toBe(new RegExp(pattern, "u").test(text));
    }
  });
});
