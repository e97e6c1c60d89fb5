/**
 * A database URL with its passwords replaced, fit to print in a message, a log line or a refusal: in
 * `user:password@`, in `?password=` (pg reads both), and in libpq's `password=` keyword.
 */
export function redactUrl(url: string): string {
  return (
    url
      // Up to the last @: an unencoded @ in a password is taken as part of it (pg reads it so), and the
      // user name may be empty (postgres://:pw@host). A query holding an @ hides the host too: safe.
      .replace(/^([a-z][a-z0-9+.-]*:\/\/)([^:@]*):.*@/i, "$1$2:***@")
      .replace(/([?&](?:ssl)?password=)[^&#]*/gi, "$1***")
      // libpq's keyword form (host=… password=…), echoed by a refusal of it as a URL.
      .replace(/(\bpassword\s*=\s*)('[^']*'|\S+)/gi, "$1***")
  );
}
