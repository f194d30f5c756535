import type { Config } from "../config.js";
import { recoverIntents } from "../logging/intents.js";
import { opsLog } from "../logging/ops.js";
import type { Recorder } from "../logging/recorder.js";
import { killedWrite } from "../policy/audit.js";

/**
 * Appends UNCERTAIN to audit.log for every write a killed process left without an outcome (see
 * logging/intents.ts), and says so once. Run at start, before serving.
 */
export async function recoverInterruptedWrites(
  config: Pick<Config, "logDir" | "logFiles">,
  recorder: Recorder,
): Promise<number> {
  if (!config.logFiles) return 0;
  const recovered = await recoverIntents(config.logDir, (fields, requestId, sentAt) =>
    recorder.audit(killedWrite(fields, requestId, sentAt)),
  );
  if (recovered > 0) {
    opsLog.warn(
      { uncertain_writes: recovered },
      "a previous server was killed while orders were at StoreLink; they are audited UNCERTAIN: check them with get_replenishment_status",
    );
  }
  return recovered;
}
