/**
 * CPU time spent by the parties of a benchmark on one machine, read from /proc (Linux): a process's
 * user + system time, and all of a database server's processes together. On a small machine the parties
 * share the cores, so throughput alone hides who spent them; CPU per operation does not.
 */
import { readdirSync, readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { round } from "./stats.js";

const TICK_MS = 10; // USER_HZ is 100 on every Linux Node runs on

/** CPU milliseconds the process has used so far (0 once it is gone, or off Linux). */
export function processCpuMs(pid: number): number {
  try {
    return ticksOf(readFileSync(`/proc/${pid}/stat`, "utf8")) * TICK_MS;
  } catch {
    return 0;
  }
}

/** CPU milliseconds used so far by every process named `postgres` (the server and its backends). */
export function postgresCpuMs(): number {
  return cpuMsOfProcessesNamed("postgres");
}

/** CPU milliseconds used so far by every process whose command name is `name` (0 off Linux). */
export function cpuMsOfProcessesNamed(name: string): number {
  let ms = 0;
  for (const entry of safeList("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      if (stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")) === name) ms += ticksOf(stat) * TICK_MS;
    } catch {
      // the process ended while we looked
    }
  }
  return ms;
}

/** utime + stime: fields 14 and 15 of /proc/pid/stat, counted after the command name's closing parenthesis. */
function ticksOf(stat: string): number {
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return Number(fields[11]) + Number(fields[12]);
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** How busy the machine was when a bench started, before it did anything: other work shows here. */
export interface MachineState {
  /** The 1-minute load average. */
  loadAverage: number;
  /** The share of the last minute, in %, in which some task waited for a CPU (Linux's pressure stall information; null where there is none). */
  cpuPressure: number | null;
}

export function machineState(): MachineState {
  let cpuPressure: number | null = null;
  try {
    const some = /^some avg10=[\d.]+ avg60=([\d.]+)/m.exec(readFileSync("/proc/pressure/cpu", "utf8"));
    if (some) cpuPressure = Number(some[1]);
  } catch {
    // not Linux, or a kernel without PSI
  }
  return { loadAverage: round(loadavg()[0], 2), cpuPressure };
}

/** "load average 0.48, CPU pressure 3.1 % over the minute before the start" */
export function describeMachine(m: MachineState): string {
  return `load average ${m.loadAverage.toFixed(2)}${m.cpuPressure === null ? "" : `, CPU pressure ${m.cpuPressure} % over the minute`} before the start`;
}
