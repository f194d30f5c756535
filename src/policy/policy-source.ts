import { createHash } from "node:crypto";
import { close, constants, fstat, open, read } from "node:fs";
import type { Config } from "../config.js";
import { startSecretManagerClient } from "../keys/index.js";
import { categorise, NOT_FOUND, type SecretAccessClient } from "../keys/secret-manager.js";
import { opsLog } from "../logging/ops.js";
import {
  OPEN_POLICY,
  POLICY_MAX_BYTES,
  parsePolicy,
  type StorePolicy,
  unavailablePolicy,
} from "./store-policy.js";

/**
 * Where the store policy comes from, read like the keys are: a file (KORRAL_POLICY_FILE) or a
 * Secret Manager secret (KORRAL_POLICY_SECRET), read again once a read is older than the cache
 * (KORRAL_POLICY_CACHE_SECONDS), so a grant or a revocation is in force within that time with no
 * restart. Whatever goes wrong (no file, a symbolic link, a FIFO, a huge file, bad JSON, the wrong
 * shape, Secret Manager failing or silent) the policy is `unavailable`, which refuses everything:
 * never a crash, never the text of the file or of Secret Manager's error in a message.
 */
export interface PolicySource {
  /** The policy in force now (possibly `unavailable`). Never rejects. */
  current(): Promise<StorePolicy>;
}

/** One read of the source: the policy's text, or why there is none (secret-free words). */
export type PolicyRead = { text: string } | { failure: string };

export interface PolicySourceOptions {
  /** Seconds a good read is used; 0 reads on every call (calls arriving together share a read). */
  cacheSeconds?: number;
  /** A read that takes longer (a hung mount, a silent Secret Manager) makes the policy unavailable. */
  deadlineMs?: number;
  /** Told of each change: a problem (never the policy's content), or null when it is readable again. */
  report?: (problem: string | null, where: string) => void;
  /** Told when a policy is read whose text differs from the last one read (a short digest). */
  loaded?: (where: string, summary: { mode: string; sha256: string }) => void;
  /** The clock of the cache; injectable so tests need no waiting. */
  now?: () => number;
}

/** The longest one read may take, by default; Secret Manager's is KORRAL_KEY_DEADLINE_MS. */
export const POLICY_READ_DEADLINE_MS = 2_000;
/** A policy that could not be read is tried again after at most this long, whatever the cache. */
export const POLICY_RETRY_MS = 1_000;
/** Reads not yet finished (hung) past which a call fails at once instead of starting another. */
const MAX_HUNG_READS = 2;

const DEADLINE = Symbol("deadline");

/**
 * The cache and its rules, for any source of text: one read at a time shared by every caller; a
 * good read kept `cacheSeconds`, a failure at most POLICY_RETRY_MS; a read bounded by the
 * deadline; at most MAX_HUNG_READS reads left hanging.
 */
export class CachedPolicySource implements PolicySource {
  #held: { policy: StorePolicy; until: number } | undefined;
  #inFlight: Promise<StorePolicy> | undefined;
  #outstanding = 0;
  /** The problem last reported (undefined: nothing read yet). */
  #reported: string | null | undefined;
  #digest: string | undefined;
  readonly #cacheMs: number;
  readonly #deadlineMs: number;
  readonly #now: () => number;
  readonly #report: NonNullable<PolicySourceOptions["report"]>;
  readonly #loaded: NonNullable<PolicySourceOptions["loaded"]>;

  constructor(
    /** What the reports name: the file's path or the secret's name (never its content). */
    readonly where: string,
    readonly readText: () => Promise<PolicyRead>,
    options: PolicySourceOptions = {},
  ) {
    this.#cacheMs = (options.cacheSeconds ?? 0) * 1000;
    this.#deadlineMs = options.deadlineMs ?? POLICY_READ_DEADLINE_MS;
    this.#now = options.now ?? Date.now;
    this.#report = options.report ?? reportChange;
    this.#loaded = options.loaded ?? reportLoaded;
  }

  current(): Promise<StorePolicy> {
    const held = this.#held;
    if (held !== undefined && this.#now() < held.until) return Promise.resolve(held.policy);
    if (this.#inFlight === undefined) {
      this.#inFlight = this.#load().finally(() => {
        this.#inFlight = undefined;
      });
    }
    return this.#inFlight;
  }

  async #load(): Promise<StorePolicy> {
    const got = await this.#readBounded();
    const parsed = "failure" in got ? { problem: got.failure } : parsePolicy(got.text);
    const problem = "problem" in parsed ? parsed.problem : null;
    // The first read reports only a problem; later ones each change, back to fine included.
    if (problem !== this.#reported && (problem !== null || this.#reported !== undefined)) {
      this.#report(problem, this.where);
    }
    this.#reported = problem;
    if ("problem" in parsed) {
      this.#digest = undefined;
      return this.#hold(
        unavailablePolicy(parsed.problem),
        Math.min(this.#cacheMs, POLICY_RETRY_MS),
      );
    }
    if ("text" in got) {
      const digest = createHash("sha256").update(got.text).digest("hex").slice(0, 12);
      if (digest !== this.#digest) {
        this.#loaded(this.where, { mode: parsed.policy.mode, sha256: digest });
      }
      this.#digest = digest;
    }
    return this.#hold(parsed.policy, this.#cacheMs);
  }

  #hold(policy: StorePolicy, forMs: number): StorePolicy {
    this.#held = { policy, until: this.#now() + forMs };
    return policy;
  }

  async #readBounded(): Promise<PolicyRead> {
    if (this.#outstanding >= MAX_HUNG_READS) {
      return { failure: "policy reads are hanging (a stuck mount or Secret Manager?)" };
    }
    this.#outstanding++;
    let timer: NodeJS.Timeout | undefined;
    const reading = this.readText()
      .catch((): PolicyRead => ({ failure: "policy could not be read" }))
      .finally(() => {
        this.#outstanding--;
      });
    const deadline = new Promise<typeof DEADLINE>((resolve) => {
      timer = setTimeout(() => resolve(DEADLINE), this.#deadlineMs);
    });
    try {
      const got = await Promise.race([reading, deadline]);
      return got === DEADLINE ? { failure: `policy read took over ${this.#deadlineMs} ms` } : got;
    } finally {
      clearTimeout(timer);
    }
  }
}

function reportChange(problem: string | null, where: string): void {
  if (problem === null) opsLog.info({ policy: where }, "store policy readable again");
  else opsLog.error({ policy: where, problem }, `store policy unavailable: ${problem}`);
}

function reportLoaded(where: string, summary: { mode: string; sha256: string }): void {
  opsLog.info({ policy: where, ...summary }, `store policy loaded (${summary.mode})`);
}

/**
 * The policy file's text. Only a regular file is read (a symbolic link is refused, so none swapped
 * in can point the policy elsewhere; a FIFO or device is refused without blocking), and only up to
 * POLICY_MAX_BYTES.
 */
export function readPolicyFile(path: string): Promise<PolicyRead> {
  return new Promise((resolve) => {
    // O_NONBLOCK: opening a FIFO with no writer would wait forever; on a regular file it is no-op.
    const flags = constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0);
    open(path, flags, (openError, fd) => {
      if (openError) {
        const code = (openError as NodeJS.ErrnoException).code;
        return resolve({
          failure:
            code === "ENOENT"
              ? "policy file does not exist"
              : code === "ELOOP"
                ? "policy file is a symbolic link (give the file itself)"
                : "policy file could not be opened",
        });
      }
      const done = (result: PolicyRead): void => {
        close(fd, () => {});
        resolve(result);
      };
      fstat(fd, (statError, stats) => {
        if (statError) return done({ failure: "policy file could not be read" });
        if (!stats.isFile()) return done({ failure: "policy file is not a regular file" });
        if (stats.size > POLICY_MAX_BYTES) return done({ failure: tooLarge("policy file") });
        // One byte more than the file's size tells a file that grew since fstat from one that fits.
        let buffer = Buffer.allocUnsafe(stats.size + 1);
        let length = 0;
        const next = (): void => {
          if (length === buffer.length) {
            if (length > POLICY_MAX_BYTES) {
              done({ failure: tooLarge("policy file") });
              return;
            }
            const grown = Buffer.allocUnsafe(POLICY_MAX_BYTES + 1);
            buffer.copy(grown);
            buffer = grown;
          }
          read(fd, buffer, length, buffer.length - length, null, (readError, bytes) => {
            if (readError) return done({ failure: "policy file could not be read" });
            if (bytes === 0) return done({ text: buffer.subarray(0, length).toString("utf8") });
            length += bytes;
            next();
          });
        };
        next();
      });
    });
  });
}

const tooLarge = (what: string): string =>
  `${what} is larger than ${POLICY_MAX_BYTES / 1024 / 1024} MiB`;

class ClientNotStarted extends Error {}

/**
 * The policy secret's text, from the version `name`. `client` may still be starting (a promise);
 * if it cannot start, every read fails (the policy is unavailable), never an unhandled rejection.
 */
export function secretPolicyReader(
  client: SecretAccessClient | Promise<SecretAccessClient>,
  name: string,
  deadlineMs: number,
): () => Promise<PolicyRead> {
  const started = Promise.resolve(client);
  started.catch(() => {});
  return async () => {
    let data: Uint8Array | string | null | undefined;
    try {
      const ready = await started.catch(() => {
        throw new ClientNotStarted();
      });
      const [version] = await ready.accessSecretVersion({ name }, { timeout: deadlineMs });
      data = version.payload?.data;
    } catch (error) {
      if (error instanceof ClientNotStarted) {
        return { failure: "Secret Manager client could not start" };
      }
      const code = (error as { code?: unknown } | null)?.code;
      if (code === NOT_FOUND) return { failure: "policy secret (or its version) does not exist" };
      return { failure: categorise(code, "the policy secret").reason };
    }
    const bytes = typeof data === "string" ? Buffer.from(data, "utf8") : Buffer.from(data ?? []);
    if (bytes.length > POLICY_MAX_BYTES) return { failure: tooLarge("policy secret") };
    if (bytes.length === 0) return { failure: "policy secret is empty" };
    return { text: bytes.toString("utf8") };
  };
}

/** The Secret Manager client a test hands in instead of the real one. */
export interface PolicyInjection {
  secretClient?: SecretAccessClient | Promise<SecretAccessClient>;
  now?: () => number;
}

/**
 * The policy source the configuration names, or undefined when it names none (today's
 * behaviour: no store policy). The Secret Manager client, when the secret is the source, starts
 * in the background unless one is injected (the keys' own client can be shared this way).
 */
export function policySourceFor(
  config: Pick<Config, "policy" | "secretManager">,
  inject: PolicyInjection = {},
): PolicySource | undefined {
  const { source, cacheSeconds } = config.policy;
  if (source === undefined) return undefined;
  if (source.kind === "file") {
    return new CachedPolicySource(source.path, () => readPolicyFile(source.path), {
      cacheSeconds,
      now: inject.now,
    });
  }
  const deadlineMs = config.secretManager.deadlineMs;
  const client = inject.secretClient ?? startSecretManagerClient("KORRAL_POLICY_SECRET");
  return new CachedPolicySource(source.name, secretPolicyReader(client, source.name, deadlineMs), {
    cacheSeconds,
    deadlineMs,
    now: inject.now,
  });
}

/** No policy configured: the open policy, every call allowed (KORRAL_AUTH=none, stdio). */
const OPEN = Promise.resolve(OPEN_POLICY);
export const NO_POLICY: PolicySource = { current: () => OPEN };
