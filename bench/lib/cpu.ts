/**
 * CPU time spent by the parties of a benchmark on one machine, read from /proc (Linux): a process's
 * user + system time, and all of a database server's processes together. On a small machine the parties
 * share the cores, so throughput alone hides who spent them; CPU per operation does not.
 */
import { readdirSync, readFileSync } from "node:fs";

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
