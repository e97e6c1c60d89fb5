/** Liveness and readiness, for load balancers and orchestrators (no key needed). */
import { COORDINATOR_LEADERSHIP, sweepOverdue } from "../../coordinator/coordinator.js";
import { Type } from "../../core/typebox.js";
import { VERSION } from "../../version.js";
import { within } from "../deadline.js";
import { HttpError } from "../errors.js";
import { defineRoute } from "../route.js";

const TAG = "health";
/** How long /readyz waits for the database before it answers 503. */
const READY_WITHIN_MS = 2000;

export const healthRoutes = [
  defineRoute({
    method: "GET",
    url: "/healthz",
    tag: TAG,
    summary: "The process is up",
    access: "public",
    reply: { status: Type.Literal("ok"), version: Type.String() },
    async handler() {
      return { status: "ok" as const, version: VERSION };
    },
  }),
  defineRoute({
    method: "GET",
    url: "/readyz",
    tag: TAG,
    summary: "The database answers",
    description: "503 not_ready when it does not answer within 2 s, or when the server is shutting down (`serve --shutdown-delay`). Also says who leads the coordinators, until when, who swept last and when, and whether that sweep is overdue.",
    access: "public",
    reply: {
      status: Type.Literal("ready"),
      database: Type.Union([Type.Literal("postgres"), Type.Literal("sqlite")]),
      coordinator: Type.Object({
        holder: Type.Union([Type.String(), Type.Null()]),
        leaseExpiresAt: Type.Union([Type.Date(), Type.Null()]),
        lastSweptBy: Type.Union([Type.String(), Type.Null()]),
        lastSweptAt: Type.Union([Type.Date(), Type.Null()]),
        secondsSinceSweep: Type.Union([Type.Integer(), Type.Null()]),
        sweepIntervalSeconds: Type.Union([Type.Number(), Type.Null()], { description: "The interval the coordinator that made the last sweep sweeps at" }),
        sweepOverdue: Type.Boolean({ description: "The last sweep is older than two of its coordinator's sweep intervals, and than 120 s: no coordinator is sweeping" }),
      }),
    },
    errors: [503],
    async handler(_input, { pool, lifecycle }) {
      if (lifecycle.draining) throw new HttpError("not_ready", "This server is shutting down; send requests to another");
      try {
        // A load balancer's probe gives up after 2-5 s.
        const leadership = await within(pool.protocol.leadershipStatus(COORDINATOR_LEADERSHIP), READY_WITHIN_MS);
        return { status: "ready" as const, database: pool.protocol.dialect, coordinator: { ...leadership, sweepOverdue: sweepOverdue(leadership) } };
      } catch (error) {
        // Logged with the other 503s (a line every 10 s, naming the cause), not here per probe.
        throw Object.assign(new HttpError("not_ready", "The database did not answer; the server log says why"), { cause: error });
      }
    },
  }),
];
