/**
 * `work`'s answer, or a rejection once `ms` have passed without one. A database that accepts
 * connections and never answers (frozen, a half-open link) is otherwise heard from only when the
 * statement times out (10 s by default); load balancers' probes and Prometheus' scrapes give up before.
 */
export async function within<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}
