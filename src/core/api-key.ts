/**
 * API keys of the HTTP server. A key is 32 random bytes; only its SHA-256 is stored. A fast hash is
 * enough here, unlike for passwords: slow hashes (bcrypt, scrypt) make guessing low-entropy secrets
 * expensive, but a 256-bit random key cannot be guessed at any speed, and a plain SHA-256 lets the
 * server find a key by an indexed lookup of its hash on every request instead of spending tens of
 * milliseconds in a key-derivation function. A stolen database yields hashes, not usable keys.
 */
import { createHash, randomBytes } from "node:crypto";

/** `admin`: everything. `producer`: create tasks, register types, read. `worker`: claim and the lease protocol. */
export const API_KEY_SCOPES = ["admin", "producer", "worker"] as const;
export type ApiKeyScope = (typeof API_KEY_SCOPES)[number];

/** What is stored about a key: never the key itself. */
export interface ApiKeyRecord {
  id: number;
  name: string | null;
  scope: ApiKeyScope;
  /** The key's first characters, so an operator can tell keys apart (`tp_3fX9aQ2b`). */
  prefix: string;
  /** Requests per minute this key may make; null = the server's default. */
  rateLimitPerMinute: number | null;
  createdAt: Date;
  revokedAt: Date | null;
}

const KEY_PREFIX = "tp_";
/** The part of a key stored in clear to tell keys apart: "tp_" and 8 characters of its 256 random bits. */
const SHOWN_CHARACTERS = KEY_PREFIX.length + 8;

/** SHA-256 of a key, in hex (what the store keeps and looks up). */
export function hashApiKey(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

/** A fresh key: show `key` to its owner once, store `keyHash` and `prefix`. */
export function generateApiKey(): { key: string; keyHash: string; prefix: string } {
  const key = KEY_PREFIX + randomBytes(32).toString("base64url");
  return { key, keyHash: hashApiKey(key), prefix: key.slice(0, SHOWN_CHARACTERS) };
}
