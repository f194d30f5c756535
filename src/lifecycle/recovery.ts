import { join } from "node:path";
import type { Config } from "../config.js";
import { auditedRequestIds, type RecoveryNotice, recoverIntents } from "../logging/intents.js";
import { opsLog } from "../logging/ops.js";
import { AUDIT_FILE, type Recorder } from "../logging/recorder.js";
import { killedWrite } from "../policy/audit.js";

/** How often a running server looks for journals whose writer has died since. */
export const RESCAN_MS = 5_000;

/**
 * Locks this server's write-intent journal, then appends UNCERTAIN to audit.log for every write a
 * killed process left without an outcome (see logging/intents.ts), and says so once per recovery.
 * Run at start, before serving, and then every RESCAN_MS while the process runs: a journal whose
 * writer was alive at start (another server on the same volume) is recovered once its writer is
 * gone. A server that cannot lock says so once and recovers nothing.
 */
export async function recoverInterruptedWrites(
  config: Pick<Config, "logDir" | "logFiles">,
  recorder: Recorder,
): Promise<number> {
  if (!config.logFiles) return 0;
  const cannotLock = await recorder.startJournal();
  if (cannotLock !== undefined) {
    opsLog.warn(
      { dir: config.logDir, why: cannotLock },
      "cannot lock write-intent journals in the log directory: no journal is recovered automatically (a write cut off by a kill stays without an audit line until checked by hand)",
    );
  }
  const reported = new Set<string>();
  const handed = new Set<string>();
  const once = (): Promise<number> =>
    recoverOnce(config.logDir, recorder, reported, cannotLock !== undefined, handed);
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
  }, RESCAN_MS);
  rescan.unref();
  return recovered;
}

const NOTICES: Record<RecoveryNotice["kind"], string> = {
  "not a regular file":
    "a write-intent journal path is not a regular file; it was skipped, not read",
  "unreadable lines":
    "unreadable lines in a write-intent journal were skipped; the rest was recovered",
  "set aside":
    "a write-intent journal was set aside, not recovered: check its writes by hand with get_replenishment_status",
  "cannot be proven dead":
    "a write-intent journal's writer cannot be proven gone, so it is not recovered: once that server is stopped, check its writes by hand",
};

async function recoverOnce(
  dir: string,
  recorder: Recorder,
  reported: Set<string>,
  cannotLock: boolean,
  handed: Set<string>,
) {
  const recovered = await recoverIntents(dir, {
    recover: (intent) => recorder.audit(killedWrite(intent)),
    handed,
    outcomes: (ids) => auditedRequestIds(join(dir, AUDIT_FILE), ids),
    reported,
    cannotLock,
    own: () => recorder.journalPath(),
    notice: ({ kind, ...fields }) => opsLog.warn(fields, NOTICES[kind]),
  });
  if (recovered > 0) {
    opsLog.warn(
      { uncertain_writes: recovered },
      "a previous server was killed while orders were at StoreLink; they are audited UNCERTAIN: check them with get_replenishment_status",
    );
  }
  return recovered;
}
