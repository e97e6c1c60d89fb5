import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { parseTimestamptz } from "../src/store/postgres/timestamptz.js";
import { PG_URL } from "./helpers/stores.js";

const pgParser = pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ, "text");

let client: pg.Client;
beforeAll(async () => {
  // Text as PostgreSQL sends it: the parser under test is not installed on this client.
  client = new pg.Client({ connectionString: PG_URL, types: { getTypeParser: () => (text: string) => text } as unknown as typeof pg.types });
  await client.connect();
});
afterAll(async () => {
  await client.end();
});

/** Every value of `expression` (over `from`) PostgreSQL writes in each time zone, read by both parsers. */
async function compare(expression: string, from = ""): Promise<number> {
  let compared = 0;
  // Whole-hour, half-hour, negative and historical second-precision offsets (LMT before 1900).
  for (const zone of ["UTC", "Asia/Kolkata", "America/St_Johns", "Pacific/Chatham", "Europe/Amsterdam", "America/New_York"]) {
    await client.query(`SET TimeZone = '${zone}'`);
    const { rows } = await client.query<{ t: string }>(`SELECT ${expression} AS t ${from}`);
    for (const { t } of rows) {
      const expected = pgParser(t);
      const actual = parseTimestamptz(t);
      expect(actual instanceof Date ? actual.getTime() : actual, `${t} in ${zone}`).toEqual(expected instanceof Date ? expected.getTime() : expected);
      compared++;
    }
  }
  return compared;
}

it("reads every timestamp PostgreSQL writes as pg's own parser does, in any session time zone", async () => {
  const random = `timestamptz '2026-11-24 04:58:33.123456+00' - random() * interval '300 years' + random() * interval '100 years'`;
  expect(await compare(random, "FROM generate_series(1, 3000)")).toBe(6 * 3000);
  // Fractions of each length (PostgreSQL drops trailing zeros), none, and the day boundaries.
  const shapes = [
    "2026-01-01 00:00:00+00", "2026-01-01 00:00:00.5+00", "2026-01-01 00:00:00.05+00", "2026-01-01 00:00:00.005+00",
    "2026-01-01 00:00:00.0005+00", "2026-12-31 23:59:59.999999+00", "2024-02-29 12:00:00.1234+00", "1883-11-18 11:59:59+00",
  ];
  expect(await compare(`unnest(ARRAY['${shapes.join("','")}']::timestamptz[])`)).toBe(6 * shapes.length);
});

it("hands every other shape to pg's parser", async () => {
  // Infinity, BC, years past 9999 and before 100 (which Date.UTC would read as 19xx).
  const unusual = ["infinity", "-infinity", "0044-03-15 12:00:00+00 BC", "12026-01-01 00:00:00+00", "0099-06-01 00:00:00+00", "0001-01-01 00:00:00+00"];
  expect(await compare(`unnest(ARRAY['${unusual.join("','")}']::timestamptz[])`)).toBe(6 * unusual.length);
});
