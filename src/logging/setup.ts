import { statSync } from "node:fs";
import { join } from "node:path";
import { type Config, ConfigError, storelinkInUse } from "../config.js";
import { configureOpsLog, opsLog } from "./ops.js";
import { AUDIT_FILE, createRecorder, type Recorder, stdoutSink, TRACE_FILE } from "./recorder.js";
import { setTraceProject } from "./trace-context.js";

export type Transport = "stdio" | "http";

/**
 * Whether HTTP mode copies every trace and audit record to stdout as a Cloud Logging line: in
 * production when stdout is not a terminal (Cloud Run collects it), and whenever the log files
 * are off, so the records always land somewhere. Locally stdout stays quiet: the records are in
 * `log/`, and one JSON line per call would flood the terminal of `npm run serve`.
 */
export function structuredStdout(
  config: Pick<Config, "production" | "logFiles">,
  stdoutIsTerminal: boolean = process.stdout.isTTY === true,
): boolean {
  return !config.logFiles || (config.production && !stdoutIsTerminal);
}

/**
 * Logging for one process, from its configuration: the ops logger (Cloud Logging fields in HTTP
 * mode), the trace/audit recorder (files unless switched off; in HTTP mode also structured stdout
 * lines, since Cloud Run keeps no files; never stdout in stdio mode), and the startup line.
 */
export function setUpLogging(config: Config, transport: Transport): Recorder {
  if (config.logFiles) refuseOddLogFiles(config.logDir);
  configureOpsLog({ format: transport === "http" ? "cloud" : "plain", level: config.logLevel });
  setTraceProject(config.googleCloudProject);
  const logStdout = transport === "http" && structuredStdout(config);
  const recorder = createRecorder({
    dir: config.logDir,
    files: config.logFiles,
    ...(logStdout ? { structured: stdoutSink() } : {}),
  });
  // Paths, switches and levels only: the configuration holds no key material.
  const summary = {
    transport,
    ...(transport === "http" ? { host: config.host, port: config.port } : {}),
    keys_file: config.keysFile,
    log_dir: config.logDir,
    log_files: config.logFiles,
    log_stdout: logStdout,
    storelink: storelinkInUse(config),
    // Whether the order cap and the rate limit are the fleet's; never the store's URL.
    limits: config.redisUrl === undefined ? "per-instance" : "shared (redis)",
    log_level: config.logLevel,
    google_cloud_project: config.googleCloudProject ?? null,
  };
  // stdio keeps stderr to its one "running on stdio" line unless debug is asked for.
  if (transport === "stdio") opsLog.debug({ config: summary }, "korral-storelink starting");
  else opsLog.info({ config: summary }, "korral-storelink starting");
  return recorder;
}

/**
 * The two log paths must be regular files (or not exist yet): appending to a FIFO blocks until
 * something reads it, so every audited write would hang; a device swallows the trail.
 */
function refuseOddLogFiles(dir: string): void {
  for (const name of [AUDIT_FILE, TRACE_FILE]) {
    const path = join(dir, name);
    let kind: string | undefined;
    try {
      const stat = statSync(path);
      if (stat.isFile()) continue;
      kind = stat.isFIFO()
        ? "a FIFO"
        : stat.isDirectory()
          ? "a directory"
          : stat.isSocket()
            ? "a socket"
            : "a device";
    } catch {
      continue; // Absent (made on first write) or unreadable (said when first written).
    }
    throw new ConfigError(
      `Invalid configuration: KORRAL_LOG_DIR: ${path} is ${kind}, not a regular file; remove it or set KORRAL_LOG_DIR to another directory`,
    );
  }
}
