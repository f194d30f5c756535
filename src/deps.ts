import { type Config, ConfigError, loadConfig } from "./config.js";
import { createKeyProvider, type KeyInjection, keyProviderFor } from "./keys/index.js";
import { Reconciler } from "./lifecycle/reconcile.js";
import { recoverInterruptedWrites } from "./lifecycle/recovery.js";
import { connectSharedLimits, sharedLimitsFor } from "./limits/index.js";
import type { Recorder } from "./logging/recorder.js";
import { nullRecorder } from "./logging/records.js";
import { setUpLogging, type Transport } from "./logging/setup.js";
import { INLINE_BUDGET_MS } from "./policy/order-by-key.js";
import { OrderCap } from "./policy/order-cap.js";
import { NO_POLICY, policySourceFor } from "./policy/policy-source.js";
import { limiterFor } from "./policy/rate-limit.js";
import { stateSigner } from "./policy/request-state.js";
import { createStoreLink } from "./storelink/index.js";
import { NO_TELEMETRY, type Telemetry } from "./telemetry/api.js";
import type { Deps } from "./tools/define.js";

/**
 * The composition root: the one place the configuration becomes the server's dependencies, called
 * by the entries (through `startDeps`) and by the test harness, nowhere else: the server factory
 * and the HTTP app take a complete `Deps`. What `given` leaves out comes from `config` (read from
 * the environment when not given, and only when needed): StoreLink (embedded, or HTTP with
 * STORELINK_URL), the key source (KORRAL_KEY_SOURCE), the loop guard, the confirmation switches,
 * the confirmation signer and the per-caller rate limit. Only the recorder defaults to nothing:
 * the entries hand in the one that writes `log/`.
 *
 * Call it once per process: the confirmation signer, and the loop guard and the rate limit
 * without a shared limits store, are per instance.
 */
export function composeDeps(
  given: Partial<Deps> = {},
  config?: Config,
  inject: KeyInjection = {},
): Deps {
  let loaded = config;
  const cfg = (): Config => {
    loaded ??= loadConfig();
    return loaded;
  };
  // The fleet's limits store, when KORRAL_REDIS_URL names one: the cap and the limiter share it.
  const shared = () => sharedLimitsFor(cfg());
  return {
    storelink: given.storelink ?? createStoreLink(cfg()),
    keys: given.keys ?? keyProviderFor(cfg(), inject),
    recorder: given.recorder ?? nullRecorder,
    orderCap: given.orderCap ?? new OrderCap({ perHour: cfg().orderCapPerHour, shared: shared() }),
    confirmWrites: given.confirmWrites ?? cfg().elicitConfirmation,
    limiter: given.limiter ?? limiterFor(cfg().rateLimitPerMin, shared()),
    signer: given.signer ?? stateSigner(cfg().requestStateKey, cfg().previousRequestStateKey),
    requireConfirmation: given.requireConfirmation ?? cfg().requireConfirmation,
    policy: given.policy ?? policySourceFor(cfg(), inject) ?? NO_POLICY,
    telemetry: given.telemetry ?? NO_TELEMETRY,
  };
}

/**
 * The longest a write of this configuration stays at StoreLink before its writer settles it: the
 * key read and the create twice (a 401 reloads the key and sends again), the asks by key after a
 * lost answer, and a margin. Past it, an attempt still "sending" has a dead writer.
 */
export const sendingBoundMs = (
  config: Pick<Config, "storelinkTimeoutMs" | "secretManager">,
): number =>
  2 * (config.storelinkTimeoutMs + config.secretManager.deadlineMs) +
  INLINE_BUDGET_MS +
  config.storelinkTimeoutMs +
  5_000;

/** How often the limits store's availability gauge is read from its health (telemetry on). */
const LIMITS_GAUGE_MS = 10_000;

/** How long start-up waits for the shared limits store before it serves without it. */
const LIMITS_START_WAIT_MS = 5_000;

/**
 * An entry's dependencies: logging set up, the writes a killed predecessor left audited, the key
 * source started before serving (a Secret Manager without credentials fails start-up here, not at
 * the first call), and the reconciler running.
 */
export async function startDeps(
  config: Config,
  transport: Transport,
  telemetry: Telemetry = NO_TELEMETRY,
): Promise<{ deps: Deps; recorder: Recorder; reconciler: Reconciler }> {
  const recorder = setUpLogging(config, transport);
  await recoverInterruptedWrites(config, recorder);
  // The first calls count on the fleet's store when it answers in time; reads never wait past it.
  const limits = await connectSharedLimits(config);
  await limits?.whenReady(LIMITS_START_WAIT_MS);
  // A store that could evict the cap's slots stops the start (exit 2 through the entry's catch),
  // or the server when it is first reached later: no slot was ever taken on it.
  if (limits?.refusal !== undefined) throw new ConfigError(limits.refusal);
  void limits?.refused.then((line) => {
    console.error(line);
    process.exit(2);
  });
  const keys = await createKeyProvider(config);
  const deps = composeDeps({ keys, recorder, telemetry }, config);
  if (limits && telemetry.enabled) {
    // The limits store's availability as a gauge: read from its health, now and every 10 s.
    const report = () => telemetry.limitsAvailable(limits.health.state === "ok");
    report();
    setInterval(report, LIMITS_GAUGE_MS).unref();
  }
  const reconciler = new Reconciler(deps, {
    graceMs: config.reconcileGraceMs,
    intervalMs: config.reconcileIntervalMs,
    logDir: config.logFiles ? config.logDir : undefined,
    sendingMs: sendingBoundMs(config),
  });
  reconciler.start();
  return { deps, recorder, reconciler };
}
