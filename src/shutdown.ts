import type { Server as HttpServer } from "node:http";
import { opsLog } from "./logging/ops.js";

/** Cloud Run sends SIGTERM and SIGKILLs 10 s later; finish well inside that. */
export const SHUTDOWN_GRACE_MS = 8_000;

/**
 * Stops an HTTP listener gracefully: no new connections, idle keep-alive connections closed,
 * in-flight requests (a write in progress included) allowed to finish and be audited, then
 * `afterClose` (flush logs) and exit 0. Past `graceMs` the remaining connections are cut and the
 * process exits 1, so an operator can tell a clean stop from a forced one.
 */
export function drainAndExit(
  listener: HttpServer,
  afterClose: () => Promise<void> = async () => {},
  graceMs = SHUTDOWN_GRACE_MS,
): void {
  opsLog.info("shutting down: refusing new connections, finishing in-flight requests");
  const force = setTimeout(() => {
    opsLog.error({ grace_ms: graceMs }, "shutdown grace exceeded; closing remaining connections");
    listener.closeAllConnections();
    process.exit(1);
  }, graceMs);
  force.unref();
  listener.close(() => {
    void afterClose()
      .catch((error: unknown) => opsLog.error({ err: error }, "shutdown flush failed"))
      .finally(() => {
        opsLog.flush();
        process.exit(0);
      });
  });
  // Keep-alive connections with no request in flight would otherwise hold close() open.
  listener.closeIdleConnections();
  // A connection that goes idle after its in-flight response must not linger either.
  const sweep = setInterval(() => listener.closeIdleConnections(), 100);
  sweep.unref();
}
