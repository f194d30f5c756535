import { fileURLToPath } from "node:url";
import { z } from "zod";
import { hostPatternProblem } from "./config/host-patterns.js";

export const DEFAULT_SECRET_NAME_PATTERN =
  "projects/{project}/secrets/storelink-key-{store}/versions/latest";

/**
 * All configuration, read once from the environment and validated. A bad value stops startup
 * with a message naming the variable. Every variable is documented in README and DEPLOYMENT.md.
 */
const commaList = z
  .string()
  .default("")
  .transform((value) =>
    value
      .split(",")
      .map((item) => item.trim())
      .filter((item) => item !== ""),
  );

const schema = z.object({
  // 0 asks the OS for a free port (tests); the listening line reports the real one.
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  /** 127.0.0.1 for local use; the container sets 0.0.0.0 (Cloud Run routes to it). */
  HOST: z.string().min(1).default("127.0.0.1"),
  KORRAL_KEYS_FILE: z
    .string()
    .min(1)
    .default(fileURLToPath(new URL("../keys.json", import.meta.url))),
  // Key source: file for local use, Secret Manager on Cloud Run.
  KORRAL_KEY_SOURCE: z.enum(["file", "secret-manager"]).default("file"),
  /**
   * The project of the store secrets and of `logging.googleapis.com/trace` in HTTP-mode log lines.
   * Cloud Run does not set it: the deploy command does.
   */
  GOOGLE_CLOUD_PROJECT: z
    .string()
    .regex(/^[a-z][a-z0-9-]{4,28}[a-z0-9]$/, "must be a GCP project id")
    .optional(),
  KORRAL_SECRET_NAME_PATTERN: z
    .string()
    .regex(/\{store\}/, "must contain {store}")
    .default(DEFAULT_SECRET_NAME_PATTERN),
  /** 0 = re-read Secret Manager on every lookup (the spec's default). */
  KORRAL_KEY_CACHE_SECONDS: z.coerce.number().int().min(0).max(300).default(0),
  KORRAL_KEY_DEADLINE_MS: z.coerce.number().int().min(100).max(30_000).default(3000),
  KORRAL_LOG_DIR: z
    .string()
    .min(1)
    .default(fileURLToPath(new URL("../log", import.meta.url))),
  /** Minutes an identical key-less order is folded into the first (in-memory StoreLink only). */
  KORRAL_DEDUPE_WINDOW_MIN: z.coerce.number().min(0).max(1440).default(10),
  /** Orders per store+SKU per rolling hour (per fleet with KORRAL_REDIS_URL); 0 turns it off. */
  KORRAL_ORDER_CAP_PER_HOUR: z.coerce.number().int().min(0).max(1000).default(3),
  /** Ask the buyer to confirm each order when the client supports form elicitation. */
  KORRAL_ELICIT_CONFIRMATION: z
    .enum(["on", "off", "true", "false", "1", "0"], { error: 'must be "on" or "off"' })
    .default("on"),
  /**
   * `true`: a write the buyer cannot be asked to confirm (a client without form elicitation) is
   * refused instead of written with `confirmed=agent`.
   */
  KORRAL_REQUIRE_CONFIRMATION: z
    .enum(["on", "off", "true", "false", "1", "0"], { error: 'must be "true" or "false"' })
    .default("false"),
  /**
   * The HMAC key of the 2026-07-28 confirmation state, at least 32 bytes; every replica of a
   * service must share it. Unset: a random key per process (required on HTTP in production).
   */
  KORRAL_REQUEST_STATE_KEY: z
    .string()
    .refine((key) => Buffer.byteLength(key, "utf8") >= 32, "must be at least 32 bytes")
    .optional(),
  /**
   * The key being rotated out: state it signed is still accepted (never signed with), so a roll
   * of KORRAL_REQUEST_STATE_KEY refuses no buyer's answer. Remove it 5 minutes after the roll.
   */
  KORRAL_REQUEST_STATE_KEY_PREVIOUS: z
    .string()
    .refine((key) => Buffer.byteLength(key, "utf8") >= 32, "must be at least 32 bytes")
    .optional(),
  /**
   * Extra Host names accepted on HTTP (e.g. the Cloud Run URL's host), exact or `*.domain` /
   * `*---rest` patterns; see README. Too-broad patterns are refused here.
   */
  KORRAL_ALLOWED_HOSTS: commaList.superRefine((entries, ctx) => {
    for (const entry of entries) {
      const problem = hostPatternProblem(entry);
      if (problem !== undefined) ctx.addIssue({ code: "custom", message: `"${entry}" ${problem}` });
    }
  }),
  /** Browser origins accepted on HTTP; requests without an Origin header are always accepted. */
  KORRAL_ALLOWED_ORIGINS: commaList,
  /**
   * The shared limits store (Memorystore, on the Redis protocol): `redis://` or `rediss://`, the
   * password (AUTH string) in the URL. Set: the order cap and the rate limit count across every
   * replica that shares it. Never logged, never echoed in an error.
   */
  KORRAL_REDIS_URL: z
    .string()
    .superRefine((value, ctx) => {
      const problem = redisUrlProblem(value);
      if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
    })
    .optional(),
  /** The deadline of each limits-store command: past it, writes are refused (fail closed). */
  KORRAL_REDIS_TIMEOUT_MS: z.coerce.number().int().min(10).max(5_000).default(300),
  /**
   * How long a limits store not reached since start may stay so before the ops log's
   * `limits store unreachable` line: Direct VPC egress can take up to a minute at an instance's
   * start. A store lost after it answered, or refusing the certificate or the AUTH string, is
   * said at once.
   */
  KORRAL_REDIS_ALERT_AFTER_MS: z.coerce.number().int().min(0).max(3_600_000).default(120_000),
  /**
   * `per-instance`: each process counts its own orders and calls, on purpose (one instance).
   * Needed only on HTTP with NODE_ENV=production and no KORRAL_REDIS_URL.
   */
  KORRAL_LIMITS: z
    .enum(["per-instance", "shared"], { error: 'must be "per-instance" or "shared" (or unset)' })
    .optional(),
  /** Tool calls per minute per caller (per fleet with KORRAL_REDIS_URL); 0 turns the backstop off. */
  KORRAL_RATE_LIMIT_PER_MIN: z.coerce.number().int().min(0).max(1_000_000).default(600),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  /** trace.jsonl and audit.log on disk; "off" where the disk is not kept (Cloud Run). */
  KORRAL_LOG_FILES: z
    .enum(["on", "off", "true", "false", "1", "0"], { error: 'must be "on" or "off"' })
    .default("on"),
  /** Set: StoreLink is reached over HTTP at this base URL. Unset: the seeded in-memory stub. */
  STORELINK_URL: z.url({ protocol: /^https?$/ }).optional(),
  /**
   * `desktop` (the MCP Bundle's setting): the StoreLink at STORELINK_URL, or the embedded demo
   * when the buyer left it empty, whatever NODE_ENV the desktop's environment carries.
   * `embedded`: run the seeded in-memory StoreLink on purpose. Needed only with
   * NODE_ENV=production, where a missing STORELINK_URL is otherwise refused.
   */
  KORRAL_STORELINK: z
    .enum(["embedded", "desktop"], { error: 'must be "embedded" or "desktop" (or unset)' })
    .optional(),
  /** `production` (the image sets it): a missing STORELINK_URL stops startup. */
  NODE_ENV: z.string().optional(),
  /**
   * How long SIGTERM and the end of stdin wait for running requests and tool calls before the
   * process exits 1, auditing writes still running as UNCERTAIN. Cloud Run SIGKILLs 10 s after
   * SIGTERM, and up to a further second goes to flushing the logs: keep it at most 9000 there.
   */
  KORRAL_SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).max(600_000).default(8_000),
  /** Per-request deadline of the HTTP StoreLink client. */
  STORELINK_TIMEOUT_MS: z.coerce.number().int().min(1).max(120_000).default(5_000),
});

export type Config = Readonly<{
  port: number;
  host: string;
  keysFile: string;
  keySource: "file" | "secret-manager";
  secretManager: Readonly<{
    project: string | undefined;
    namePattern: string;
    cacheSeconds: number;
    deadlineMs: number;
  }>;
  logDir: string;
  logLevel: z.infer<typeof schema>["LOG_LEVEL"];
  logFiles: boolean;
  googleCloudProject: string | undefined;
  dedupeWindowMs: number;
  orderCapPerHour: number;
  elicitConfirmation: boolean;
  requireConfirmation: boolean;
  /** Unset: each process draws its own (see policy/request-state.ts). */
  requestStateKey: string | undefined;
  /** Accepted, never signed with (a rotation); see policy/request-state.ts. */
  previousRequestStateKey: string | undefined;
  storelinkUrl: string | undefined;
  storelinkTimeoutMs: number;
  production: boolean;
  allowedHosts: readonly string[];
  allowedOrigins: readonly string[];
  rateLimitPerMin: number;
  /** Set: the limits are the fleet's, on this Redis (see KORRAL_REDIS_URL); a secret. */
  redisUrl: string | undefined;
  redisTimeoutMs: number;
  /** See KORRAL_REDIS_ALERT_AFTER_MS. */
  redisAlertAfterMs: number;
  /** Whether the operator said the limits are meant per instance. */
  limitsPerInstance: boolean;
  shutdownGraceMs: number;
}>;

/**
 * Why the Redis client could not use `value`, or undefined: the rules of node-redis's own URL
 * parser (`RedisClient.parseURL`), checked here so a URL it would refuse stops the start with the
 * variable named. The reasons never quote the URL (it holds the AUTH string).
 */
export function redisUrlProblem(value: string): string | undefined {
  const SCHEME = "must be a redis:// or rediss:// URL (its text is not repeated here)";
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return SCHEME;
  }
  if ((url.protocol !== "redis:" && url.protocol !== "rediss:") || url.hostname === "") {
    return SCHEME;
  }
  const unusable = (why: string) =>
    `the Redis client cannot use it: ${why} (its text is not repeated here)`;
  if (url.port !== "" && Number(url.port) < 1) return unusable("its port must be 1 to 65535");
  for (const [part, text] of [
    ["user", url.username],
    ["password", url.password],
  ] as const) {
    try {
      decodeURIComponent(text);
    } catch {
      return unusable(`its ${part} has a malformed %-escape`);
    }
  }
  // The path names a database (a number) or nothing; anything else the client refuses.
  if (url.pathname.length > 1 && !/^\/\d{1,9}$/.test(url.pathname)) {
    return unusable("its path must be empty or a database number such as /0");
  }
  return undefined;
}

/** The longest shutdown grace Cloud Run leaves room for (see KORRAL_SHUTDOWN_GRACE_MS). */
export const CLOUD_RUN_MAX_GRACE_MS = 9_000;

export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

/**
 * Validates environment variables against `envSchema`. Empty strings count as unset, as they do
 * in most deployment tools; a failure names every bad variable.
 */
export function parseEnv<S extends z.ZodType>(
  envSchema: S,
  env: NodeJS.ProcessEnv,
  what: string,
): z.infer<S> {
  const { data, problems } = checkEnv(envSchema, env);
  if (problems.length > 0) throw new ConfigError(`Invalid ${what}: ${problems.join("; ")}`);
  return data;
}

/**
 * Every problem of `env` at once, and the values read with the bad variables left unset, so that
 * the checks across variables can run too (one start tells the operator everything).
 */
function checkEnv<S extends z.ZodType>(
  envSchema: S,
  env: NodeJS.ProcessEnv,
): { data: z.infer<S>; problems: string[]; invalid: ReadonlySet<string> } {
  const present: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (value !== undefined && value !== "") present[name] = value;
  }
  const problems: string[] = [];
  const invalid = new Set<string>();
  // A value of only whitespace is a mistake, never "unset": " " would coerce to 0 and turn the
  // cap, the rate limit or the grace off without a word.
  const names = Object.keys(envSchema instanceof z.ZodObject ? envSchema.shape : {});
  for (const name of names) {
    if (typeof present[name] === "string" && present[name].trim() === "") {
      problems.push(`${name}: is only whitespace; unset it or give a value`);
      invalid.add(name);
    }
  }
  let parsed = envSchema.safeParse(withoutNames(present, invalid));
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      problems.push(`${issue.path.join(".")}: ${issue.message}`);
      invalid.add(String(issue.path[0]));
    }
    parsed = envSchema.safeParse(withoutNames(present, invalid));
    if (!parsed.success) throw new ConfigError(`Invalid configuration: ${problems.join("; ")}`);
  }
  return { data: parsed.data, problems, invalid };
}

function withoutNames(
  values: Record<string, string>,
  names: ReadonlySet<string>,
): Record<string, string> {
  return Object.fromEntries(Object.entries(values).filter(([name]) => !names.has(name)));
}

/** Where the configuration is read: the HTTP entry has requirements of its own in production. */
export type Entry = "http" | "stdio";

/**
 * The configuration, or a ConfigError listing every missing or invalid variable (one line), so
 * one failed start tells the operator all of it. `entry` adds what that entry needs on its own.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, entry?: Entry): Config {
  const { data: c, problems, invalid } = checkEnv(schema, env);
  /** Set, or named as invalid already: no second line about the same variable. */
  const given = (name: keyof z.infer<typeof schema>): boolean =>
    c[name] !== undefined || invalid.has(name);
  if (
    c.KORRAL_KEY_SOURCE === "secret-manager" &&
    c.KORRAL_SECRET_NAME_PATTERN.includes("{project}") &&
    !given("GOOGLE_CLOUD_PROJECT")
  ) {
    problems.push(
      "GOOGLE_CLOUD_PROJECT: required when KORRAL_KEY_SOURCE=secret-manager (the secret name pattern uses {project})",
    );
  }
  const production = c.NODE_ENV === "production";
  // Cloud Run (which sets K_SERVICE) kills the container 10 s after SIGTERM; the logs' flush needs
  // up to a second of that. A longer grace would be cut short mid-audit.
  if (env.K_SERVICE !== undefined && c.KORRAL_SHUTDOWN_GRACE_MS > CLOUD_RUN_MAX_GRACE_MS) {
    problems.push(
      `KORRAL_SHUTDOWN_GRACE_MS: at most ${CLOUD_RUN_MAX_GRACE_MS} on Cloud Run (K_SERVICE is set), which kills the container 10 s after SIGTERM`,
    );
  }
  if (c.STORELINK_URL !== undefined && c.KORRAL_STORELINK === "embedded") {
    problems.push(
      "KORRAL_STORELINK=embedded and STORELINK_URL are both set; unset one (STORELINK_URL for the real StoreLink, KORRAL_STORELINK=embedded for the demo)",
    );
  }
  if (production && !given("STORELINK_URL") && !given("KORRAL_STORELINK")) {
    problems.push(
      "STORELINK_URL: required when NODE_ENV=production; set it to StoreLink's base URL (or set KORRAL_STORELINK=embedded to run the seeded demo StoreLink on purpose)",
    );
  }
  if (c.KORRAL_REDIS_URL !== undefined && c.KORRAL_LIMITS === "per-instance") {
    problems.push(
      "KORRAL_LIMITS=per-instance and KORRAL_REDIS_URL are both set; unset one (KORRAL_REDIS_URL for limits shared by every replica, KORRAL_LIMITS=per-instance for one instance)",
    );
  }
  if (!given("KORRAL_REDIS_URL") && c.KORRAL_LIMITS === "shared") {
    problems.push(
      "KORRAL_LIMITS=shared needs KORRAL_REDIS_URL, the limits store every replica shares",
    );
  }
  if (entry === "http" && production) {
    // Replicas must share the key that signs confirmation state, or a buyer's answer reaching
    // another replica is refused.
    if (!given("KORRAL_REQUEST_STATE_KEY")) {
      problems.push(
        "KORRAL_REQUEST_STATE_KEY: required on HTTP when NODE_ENV=production; set it from Secret Manager (at least 32 bytes, the same for every replica; see DEPLOYMENT.md)",
      );
    }
    // Several replicas count the order cap and the rate limit as one only on a shared store:
    // production says where it is, or that one instance is meant.
    if (!given("KORRAL_REDIS_URL") && !given("KORRAL_LIMITS")) {
      problems.push(
        "KORRAL_REDIS_URL: required on HTTP when NODE_ENV=production, so every replica counts the order cap and the rate limit together; set it to the limits store (see DEPLOYMENT.md), or set KORRAL_LIMITS=per-instance if one instance is meant",
      );
    }
  }
  if (problems.length > 0) {
    throw new ConfigError(`Invalid configuration: ${problems.join("; ")}`);
  }
  return {
    port: c.PORT,
    host: c.HOST,
    keysFile: c.KORRAL_KEYS_FILE,
    keySource: c.KORRAL_KEY_SOURCE,
    secretManager: {
      project: c.GOOGLE_CLOUD_PROJECT,
      namePattern: c.KORRAL_SECRET_NAME_PATTERN,
      cacheSeconds: c.KORRAL_KEY_CACHE_SECONDS,
      deadlineMs: c.KORRAL_KEY_DEADLINE_MS,
    },
    logDir: c.KORRAL_LOG_DIR,
    logLevel: c.LOG_LEVEL,
    logFiles: ["on", "true", "1"].includes(c.KORRAL_LOG_FILES),
    googleCloudProject: c.GOOGLE_CLOUD_PROJECT,
    dedupeWindowMs: c.KORRAL_DEDUPE_WINDOW_MIN * 60_000,
    orderCapPerHour: c.KORRAL_ORDER_CAP_PER_HOUR,
    elicitConfirmation: ["on", "true", "1"].includes(c.KORRAL_ELICIT_CONFIRMATION),
    requireConfirmation: ["on", "true", "1"].includes(c.KORRAL_REQUIRE_CONFIRMATION),
    requestStateKey: c.KORRAL_REQUEST_STATE_KEY,
    previousRequestStateKey: c.KORRAL_REQUEST_STATE_KEY_PREVIOUS,
    storelinkUrl: c.STORELINK_URL,
    storelinkTimeoutMs: c.STORELINK_TIMEOUT_MS,
    production,
    allowedHosts: c.KORRAL_ALLOWED_HOSTS,
    allowedOrigins: c.KORRAL_ALLOWED_ORIGINS,
    rateLimitPerMin: c.KORRAL_RATE_LIMIT_PER_MIN,
    redisUrl: c.KORRAL_REDIS_URL,
    redisTimeoutMs: c.KORRAL_REDIS_TIMEOUT_MS,
    redisAlertAfterMs: c.KORRAL_REDIS_ALERT_AFTER_MS,
    limitsPerInstance: c.KORRAL_LIMITS === "per-instance",
    shutdownGraceMs: c.KORRAL_SHUTDOWN_GRACE_MS,
  };
}

/** What the start-up line and /healthz name as the StoreLink in use. */
export const EMBEDDED_STORELINK = "embedded demo";

/**
 * "embedded demo", or the StoreLink URL's host (and port) only: never its path, query or
 * userinfo, any of which could carry a credential.
 */
export function storelinkInUse(config: Pick<Config, "storelinkUrl">): string {
  if (config.storelinkUrl === undefined) return EMBEDDED_STORELINK;
  return new URL(config.storelinkUrl).host;
}
