import { expect, it } from "vitest";
import { ValidationError } from "../src/core/errors.js";
import { connect } from "../src/api/taskpool.js";

it("connect() gives producers and operators the registry and enqueue in a few words", async () => {
  const pool = await connect("sqlite::memory:");
  try {
    const type = await pool.registerTaskType({
      name: "product_resync",
      paramsSchema: { type: "object", properties: { storeId: { type: "integer" } }, required: ["storeId"] },
      priority: 5,
    });
    expect(type).toMatchObject({ name: "product_resync", version: 1, priority: 5 });
    const task = await pool.enqueue("product_resync", { storeId: 42 }, { concurrencyKey: "store:42" });
    expect(task).toMatchObject({ params: { storeId: 42 }, priority: 5, taskTypeVersion: 1, concurrencyKey: "store:42" });
    const error = await pool.enqueue("product_resync", { storeId: "42" }).catch((e) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect(error.message).toBe("Invalid params for product_resync v1: params.storeId: must be integer");
  } finally {
    await pool.close();
  }
});
