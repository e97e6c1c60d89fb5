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
