import { fileURLToPath } from "node:url";
import { z } from "zod";

/**
 * All configuration, read once from the environment and validated. A bad value stops startup
 * with a message naming the variable. Every variable is documented in README and DEPLOYMENT.md.
 */
const schema = z.object({
  // 0 asks the OS for a free port (tests); the listening line reports the real one.
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  /** 127.0.0.1 for local use; the container sets 0.0.0.0 (Cloud Run routes to it). */
  HOST: z.string().min(1).default("127.0.0.1"),
  KORRAL_KEYS_FILE: z
    .string()
    .min(1)
    .default(fileURLToPath(new URL("../keys.json", import.meta.url))),
  KORRAL_LOG_DIR: z
    .string()
    .min(1)
    .default(fileURLToPath(new URL("../log", import.meta.url))),
  /** Minutes an identical key-less order is folded into the first (in-memory StoreLink only). */
  KORRAL_DEDUPE_WINDOW_MIN: z.coerce.number().min(0).max(1440).default(10),
  /** Orders per store+SKU per rolling hour, per MCP instance; 0 turns the loop guard off. */
  KORRAL_ORDER_CAP_PER_HOUR: z.coerce.number().int().min(0).max(1000).default(3),
  /** Ask the buyer to confirm each order when the client supports form elicitation. */
  KORRAL_ELICIT_CONFIRMATION: z
    .enum(["on", "off", "true", "false", "1", "0"], { error: 'must be "on" or "off"' })
    .default("on"),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  /** trace.jsonl and audit.log on disk; "off" where the disk is not kept (Cloud Run). */
  KORRAL_LOG_FILES: z
    .enum(["on", "off", "true", "false", "1", "0"], { error: 'must be "on" or "off"' })
    .default("on"),
  /** Project id for `logging.googleapis.com/trace` in HTTP-mode log lines (Cloud Run sets none). */
  GOOGLE_CLOUD_PROJECT: z.string().min(1).optional(),
});

export type Config = Readonly<{
  port: number;
  host: string;
  keysFile: string;
  logDir: string;
  logLevel: z.infer<typeof schema>["LOG_LEVEL"];
  logFiles: boolean;
  googleCloudProject: string | undefined;
  dedupeWindowMs: number;
  orderCapPerHour: number;
  elicitConfirmation: boolean;
}>;

export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // Empty strings count as unset, as they do in most deployment tools.
  const present = Object.fromEntries(
    Object.entries(env).filter(([, v]) => v !== undefined && v !== ""),
  );
  const parsed = schema.safeParse(present);
  if (!parsed.success) {
    const problems = parsed.error.issues
      .map((issue) => `${issue.path.join(".")}: ${issue.message}`)
      .join("; ");
    throw new ConfigError(`Invalid configuration: ${problems}`);
  }
  const c = parsed.data;
  return {
    port: c.PORT,
    host: c.HOST,
    keysFile: c.KORRAL_KEYS_FILE,
    logDir: c.KORRAL_LOG_DIR,
    logLevel: c.LOG_LEVEL,
    logFiles: ["on", "true", "1"].includes(c.KORRAL_LOG_FILES),
    googleCloudProject: c.GOOGLE_CLOUD_PROJECT,
    dedupeWindowMs: c.KORRAL_DEDUPE_WINDOW_MIN * 60_000,
    orderCapPerHour: c.KORRAL_ORDER_CAP_PER_HOUR,
    elicitConfirmation: ["on", "true", "1"].includes(c.KORRAL_ELICIT_CONFIRMATION),
  };
}
