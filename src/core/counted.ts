/** "1 task", "3 tasks": a count and its noun, for messages people read (regular plurals only). */
export const counted = (n: number, noun: string): string => `${n} ${noun}${n === 1 ? "" : "s"}`;
