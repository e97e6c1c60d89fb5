/**
 * Who the caller is: its key's scope, so a client (the dashboard) shows only the actions the key may
 * take instead of offering buttons that answer 403.
 */
import { API_KEY_SCOPES } from "../../core/api-key.js";
import { Type } from "../../core/typebox.js";
import { defineRoute } from "../route.js";

export const whoamiRoutes = [
  defineRoute({
    method: "GET",
    url: "/api/whoami",
    tag: "keys",
    summary: "The scope of the API key presented",
    description:
      "Any valid key may ask. `auth` is `none` when the server runs without keys: every caller may then do everything (scope admin) and `key` is null.",
    access: ["producer", "worker"],
    reply: {
      auth: Type.Union([Type.Literal("keys"), Type.Literal("none")]),
      scope: Type.Union(API_KEY_SCOPES.map((s) => Type.Literal(s))),
      key: Type.Union([Type.Object({ id: Type.Integer(), name: Type.Union([Type.String(), Type.Null()]), prefix: Type.String() }), Type.Null()]),
    },
    async handler(_input, { request }) {
      const key = request.apiKey;
      // The auth hook sets the key on every guarded route when keys are on: none here means they are off.
      if (!key) return { auth: "none" as const, scope: "admin" as const, key: null };
      return { auth: "keys" as const, scope: key.scope, key: { id: key.id, name: key.name, prefix: key.prefix } };
    },
  }),
];
