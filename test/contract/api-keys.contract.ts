import { describe, expect, it } from "vitest";
import { generateApiKey, hashApiKey } from "../../src/core/api-key.js";
import { ApiKeyNotFoundError, ValidationError } from "../../src/core/errors.js";
import type { StoreKind } from "../helpers/stores.js";
import { useStore } from "./context.js";

export function apiKeysContract(kind: StoreKind) {
  describe("API keys", () => {
    const ctx = useStore(kind);

    it("stores a key's hash and prefix, finds it by hash, and lists keys oldest first", async () => {
      const first = generateApiKey();
      const created = await ctx.store.createApiKey({ scope: "admin", name: "ci", keyHash: first.keyHash, prefix: first.prefix });
      expect(created).toEqual({ id: created.id, name: "ci", scope: "admin", prefix: first.prefix, rateLimitPerMinute: null, createdAt: ctx.clock.now(), revokedAt: null });
      expect(Object.values(created)).not.toContain(first.key);
      ctx.clock.advance(1000);
      const second = generateApiKey();
      const worker = await ctx.store.createApiKey({ scope: "worker", keyHash: second.keyHash, prefix: second.prefix, rateLimitPerMinute: 600 });
      expect(worker).toMatchObject({ name: null, scope: "worker", rateLimitPerMinute: 600 });

      expect(await ctx.store.findApiKey(hashApiKey(first.key))).toEqual(created);
      expect(await ctx.store.findApiKey(hashApiKey("tp_not-a-key"))).toBeNull();
      expect((await ctx.store.listApiKeys()).map((k) => k.id)).toEqual([created.id, worker.id]);
    });

    it("revokes at once and for good; revoking again keeps the first time; an unknown id is not found", async () => {
      const { keyHash, prefix } = generateApiKey();
      const key = await ctx.store.createApiKey({ scope: "producer", keyHash, prefix });
      ctx.clock.advance(5000);
      const revoked = await ctx.store.revokeApiKey(key.id);
      expect(revoked).toEqual({ ...key, revokedAt: ctx.clock.now() });
      ctx.clock.advance(5000);
      expect(await ctx.store.revokeApiKey(key.id)).toEqual(revoked);
      expect(await ctx.store.findApiKey(keyHash)).toEqual(revoked);
      const missing = await ctx.store.revokeApiKey(key.id + 100).catch((e) => e);
      expect(missing).toBeInstanceOf(ApiKeyNotFoundError);
      expect(missing).toMatchObject({ code: "not_found", message: `API key ${key.id + 100} does not exist (taskpool keys list shows the ids)` });
    });

    it("refuses bad input, naming the field, and stores nothing", async () => {
      const { keyHash, prefix } = generateApiKey();
      const bad: [unknown, RegExp][] = [
        [{ scope: "root", keyHash, prefix }, /^Invalid API key: scope: must be one of admin, producer, worker/],
        [{ scope: "admin", keyHash: "abc", prefix }, /^Invalid API key: keyHash: must be the SHA-256 of a key/],
        [{ scope: "admin", keyHash, prefix, rateLimitPerMinute: 0 }, /^Invalid API key: rateLimitPerMinute: Expected integer to be greater or equal to 1/],
        [{ scope: "admin", keyHash, prefix, name: "" }, /^Invalid API key: name: Expected string length greater or equal to 1/],
        [{ scope: "admin", keyHash, prefix, key: "tp_secret" }, /^Invalid API key: key: Unexpected property/],
      ];
      for (const [input, message] of bad) {
        const error = await ctx.store.createApiKey(input as never).catch((e) => e);
        expect(error).toBeInstanceOf(ValidationError);
        expect(error.message).toMatch(message);
      }
      await expect(ctx.store.findApiKey("not a hash")).rejects.toThrow(/^Invalid key hash: key hash: must be the SHA-256 of a key/);
      await expect(ctx.store.revokeApiKey(0)).rejects.toThrow(/^Invalid API key id: /);
      expect(await ctx.store.listApiKeys()).toEqual([]);
    });
  });
}
