/** Recurring schedules: list, read, create or update by name, pause, resume, remove. */
import { ScheduleNotFoundError } from "../../core/errors.js";
import { ScheduleRecordSchema } from "../../core/record-schemas.js";
import { ScheduleDefinitionSchema, ScheduleName } from "../../core/schemas.js";
import { Type } from "../../core/typebox.js";
import { defineRoute } from "../route.js";

const TAG = "schedules";
const NameParams = Type.Object({ name: ScheduleName }, { additionalProperties: false });

export const scheduleRoutes = [
  defineRoute({
    method: "GET",
    url: "/api/schedules",
    tag: TAG,
    summary: "Every schedule, by name, with its next run, last run and last result",
    access: ["producer"],
    reply: { schedules: Type.Array(ScheduleRecordSchema) },
    async handler(_input, { pool }) {
      return { schedules: await pool.schedules.list() };
    },
  }),
  defineRoute({
    method: "POST",
    url: "/api/schedules",
    tag: TAG,
    summary: "Create a schedule, or update the one of that name",
    description:
      "201 created, 200 updated. An update that keeps the cron expression and time zone keeps the next run; one without `enabled` leaves a paused schedule paused.",
    access: ["admin"],
    body: ScheduleDefinitionSchema,
    status: [201, 200],
    reply: { schedule: ScheduleRecordSchema, created: Type.Boolean() },
    async handler({ body }, { pool, reply }) {
      const { schedule, created } = await pool.protocol.saveSchedule(body);
      if (!created) reply.code(200);
      return { schedule, created };
    },
  }),
  defineRoute({
    method: "GET",
    url: "/api/schedules/:name",
    tag: TAG,
    summary: "One schedule",
    access: ["producer"],
    params: NameParams,
    reply: { schedule: ScheduleRecordSchema },
    errors: [404],
    async handler({ params }, { pool }) {
      const schedule = await pool.schedules.get(params.name);
      if (!schedule) throw new ScheduleNotFoundError(params.name);
      return { schedule };
    },
  }),
  defineRoute({
    method: "POST",
    url: "/api/schedules/:name/pause",
    tag: TAG,
    summary: "Pause a schedule: it fires no more until resumed",
    access: ["admin"],
    params: NameParams,
    reply: { schedule: ScheduleRecordSchema },
    errors: [404],
    async handler({ params }, { pool }) {
      return { schedule: await pool.schedules.pause(params.name) };
    },
  }),
  defineRoute({
    method: "POST",
    url: "/api/schedules/:name/resume",
    tag: TAG,
    summary: "Resume a schedule from its next tick after now",
    description: "The ticks that passed while it was paused are not caught up.",
    access: ["admin"],
    params: NameParams,
    reply: { schedule: ScheduleRecordSchema },
    errors: [404],
    async handler({ params }, { pool }) {
      return { schedule: await pool.schedules.resume(params.name) };
    },
  }),
  defineRoute({
    method: "POST",
    url: "/api/schedules/:name/cancel-pending",
    tag: TAG,
    summary: "Cancel the schedule's tasks that are still pending",
    description:
      "Its runs' tasks not yet claimed (a fan-out's later batches, due tasks waiting) are cancelled, each with an event; tasks workers hold run on. " +
      "To stop a schedule and its work: pause it first (no run is made meanwhile), then this, then DELETE it if wanted: removed, it no longer knows its tasks.",
    access: ["admin"],
    params: NameParams,
    reply: { cancelled: Type.Array(Type.Integer(), { description: "the ids of the tasks cancelled, in order" }) },
    errors: [404],
    async handler({ params }, { pool }) {
      return { cancelled: await pool.schedules.cancelPending(params.name) };
    },
  }),
  defineRoute({
    method: "DELETE",
    url: "/api/schedules/:name",
    tag: TAG,
    summary: "Remove a schedule and its tick history; the tasks it made stay (cancel-pending first cancels those not yet claimed)",
    access: ["admin"],
    params: NameParams,
    reply: { schedule: ScheduleRecordSchema },
    errors: [404],
    async handler({ params }, { pool }) {
      return { schedule: await pool.schedules.remove(params.name) };
    },
  }),
];
