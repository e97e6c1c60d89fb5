import { InvalidArgumentError } from "commander";

export function integer(value: string): number {
  if (!/^-?\d+$/.test(value)) throw new InvalidArgumentError("expected an integer");
  return Number(value);
}

export function positiveInteger(value: string): number {
  const n = integer(value);
  if (n <= 0) throw new InvalidArgumentError("expected a positive integer");
  return n;
}

/** A task id given on the command line; anything else is refused before any task is touched. */
export function taskId(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1 || !Number.isSafeInteger(Number(value))) {
    throw new InvalidArgumentError(`"${value}" is not a task id: pass the number \`taskpool tasks list\` shows, e.g. 42`);
  }
  return Number(value);
}
