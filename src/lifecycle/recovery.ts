import { join } from "node:path";
import type { Config } from "../config.js";
import { auditedRequestIds, LEASE_MS, recoverIntents } from "../logging/intents.js";
import { opsLog } from "../logging/ops.js";
import { AUDIT_FILE, type Recorder } from "../logging/recorder.js";
import { killedWrite } from "../policy/audit.js";

/**
 * Appends UNCERTAIN to audit.log for every write a killed process left without an outcome (see
 * logging/intents.ts), and says so once per recovery. Run at start, before serving, and then every
 * half lease while the process runs: a journal whose writer was alive at start (another container
 * on the same volume) is recovered once its writer is gone.
 */
export async function recoverInterruptedWrites(
  config: Pick<Config, "logDir" | "logFiles">,
  recorder: Recorder,
): Promise<number> {
  if (!config.logFiles) return 0;
  const reported = new Set<string>();
  const once = (): Promise<number> => recoverOnce(config.logDir, recorder, reported);
  const recovered = await once();
  let running = false;
  const rescan = setInterval(() => {
    if (running) return;
    running = true;
    once()
      .catch((error: unknown) =>
        opsLog.error({ err: error }, "recovering interrupted writes failed"),
      )
      .finally(() => {
        running = false;
      });
  }, LEASE_MS / 2);
  rescan.unref();
  return recovered;
}

async function recoverOnce(dir: string, recorder: Recorder, reported: Set<string>) {
  const recovered = await recoverIntents(dir, {
    recover: (fields, requestId, sentAt) => recorder.audit(killedWrite(fields, requestId, sentAt)),
    outcomes: () => auditedRequestIds(join(dir, AUDIT_FILE)),
    reported,
    notice: (notice) =>
      notice.kind === "not a regular file"
        ? opsLog.warn(
            { file: notice.file },
            "a write-intent journal path is not a regular file; it was skipped, not read",
          )
        : opsLog.warn(
            { file: notice.file, lines: notice.lines },
            "unreadable lines in a write-intent journal were skipped; the rest was recovered",
          ),
  });
  if (recovered > 0) {
    opsLog.warn(
      { uncertain_writes: recovered },
      "a previous server was killed while orders were at StoreLink; they are audited UNCERTAIN: check them with get_replenishment_status",
    );
  }
  return recovered;
}
