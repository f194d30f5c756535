import { createClient, ErrorReply } from "redis";
import { LimitsHealth } from "./health.js";
import {
  ATTEMPT_TTL_MS,
  type AttemptEntry,
  type AttemptRecord,
  HOUR_MS,
  MAX_HOLDERS,
  PENDING_MS,
  SENDING_MS,
  type Settle,
  type SlotBook,
  type SlotCounts,
  type TakeResult,
} from "./slots.js";

/**
 * The shared limits store on the Redis protocol (Memorystore): one node-redis client per process,
 * the slot book as server-side scripts, and the connection's health.
 *
 * - No command is ever sent twice: node-redis rejects the commands awaiting a reply when the
 *   connection drops (it does not resend them), and with `disableOfflineQueue` nothing is queued
 *   while it reconnects: a call then fails at once, and the caller fails closed.
 * - Every command has a deadline (`timeoutMs`) on its answer, not only on its queueing (node-redis
 *   drops its own timeout once a command is written): a slow Redis is an unreachable one. A
 *   command past it may still run on the server; a slot it took then counts (the safe side).
 * - The URL and its password never leave this module, and no text a server sends back is ever
 *   logged (a proxy may quote the AUTH string in its error): errors are described by `describe`
 *   as their cause, class and code only.
 * - No slot is taken on a store that could evict it: each connection first reads the store's
 *   `maxmemory_policy` (INFO memory; Memorystore blocks CONFIG), and anything but `noeviction`
 *   stops the server (`refusal`).
 */

export interface RedisLimitsOptions {
  url: string;
  /** The deadline of each command, and of a connection attempt. */
  timeoutMs: number;
  /** How long a store never reached may stay so before the outage line (limits/health.ts). */
  warmupMs?: number;
}

/** A connected (or connecting) limits store. */
export interface RedisLimits {
  slots: SlotBook;
  /** The client, for the shared rate limit (policy/rate-limit.ts). */
  client: RedisClient;
  health: LimitsHealth;
  /** `answer`, or a LimitsStoreError once the deadline has passed without it. */
  deadline<T>(answer: Promise<T>): Promise<T>;
  /**
   * Resolves once connected and its eviction policy checked, or refused, or after `ms` whatever
   * happened (start-up waits this long).
   */
  whenReady(ms: number): Promise<void>;
  /** Set once the store's eviction policy is refused: the line to stop the server with. */
  readonly refusal: string | undefined;
  /** Resolves with `refusal` when it is set. */
  refused: Promise<string>;
  /** An error as `cause: Class CODE`, for the ops log: never a URL, password or server text. */
  describe(error: unknown): string;
  close(): Promise<void>;
}

export type RedisClient = ReturnType<typeof newClient>;

/**
 * One connection that never gives up (writes resume by themselves when Redis is back), with a
 * deadline on every command and no offline queue.
 */
const newClient = ({ url, timeoutMs }: RedisLimitsOptions) =>
  createClient({
    url,
    disableOfflineQueue: true,
    commandOptions: { timeout: timeoutMs },
    pingInterval: 30_000,
    socket: {
      connectTimeout: Math.max(timeoutMs, 1_000),
      reconnectStrategy: (retries: number) => Math.min(50 * 2 ** retries, 2_000),
    },
  });

/** A reply that is not what the script returns: the store cannot be trusted with a decision. */
export class LimitsStoreError extends Error {
  override readonly name = "LimitsStoreError";
}

/**
 * Prunes the bucket's expired slots and counts the rest on Redis's own clock; then, for `take`,
 * takes a pending slot for the holder if the name holds none and there is room, or adds the
 * holder to the name's pending slot. One script: one atomic step. Slots are `state:until` (a
 * pending one `p:until:holder,holder`) in one hash per bucket, which expires with its last slot.
 */
const DECIDE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local staleUntil = now + tonumber(ARGV[6])
local all = redis.call('HGETALL', KEYS[1])
local placed, uncertain, inflight = 0, 0, 0
local mine, mineUntil, mineHolders = nil, nil, nil
for i = 1, #all, 2 do
  local state, untilMs, holders = string.match(all[i + 1], '^(%a):(%d+):?([^:]*)$')
  if state == nil or tonumber(untilMs) <= now then
    redis.call('HDEL', KEYS[1], all[i])
  else
    if all[i] == ARGV[1] then mine, mineUntil, mineHolders = state, untilMs, holders end
    if state == 'c' then placed = placed + 1
    elseif state == 'u' or tonumber(untilMs) < staleUntil then uncertain = uncertain + 1
    else inflight = inflight + 1 end
  end
end
local kind = 'taken'
if mine then
  kind = 'held'
  if ARGV[3] == 'take' and mine == 'p' then
    local list, count, seen = {}, 0, false
    for h in string.gmatch(mineHolders, '[^,]+') do
      count = count + 1
      list[count] = h
      if h == ARGV[5] then seen = true end
    end
    local add = ARGV[5]
    if count >= tonumber(ARGV[7]) then add = '*' end
    if not seen then
      local has = false
      for _, h in ipairs(list) do if h == add then has = true end end
      if not has then
        list[count + 1] = add
        redis.call('HSET', KEYS[1], ARGV[1], 'p:' .. mineUntil .. ':' .. table.concat(list, ','))
      end
    end
  end
elseif placed + uncertain + inflight >= tonumber(ARGV[2]) then kind = 'full'
elseif ARGV[3] == 'take' then
  local ttl = tonumber(ARGV[4])
  redis.call('HSET', KEYS[1], ARGV[1], 'p:' .. (now + ttl) .. ':' .. ARGV[5])
  if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
end
if ARGV[3] == 'take' and kind ~= 'full' and ARGV[8] ~= '' then
  redis.call('HSET', KEYS[2], ARGV[8], 's:' .. now .. ':0:' .. ARGV[9])
  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[10]))
end
return {kind, placed, uncertain, inflight}
`;

/**
 * The settle rules of limits/slots.ts, on Redis's clock; with an attempt id (ARGV[5]), the
 * attempt is marked uncertain or removed in the same step. Attempts are `state:since:lease:record`.
 * Returns 1, or 2 for a reconciler's settle whose attempt is gone (nothing changed).
 */
const SETTLE = `
local how = ARGV[2]
if ARGV[5] ~= '' and (how == 'confirmed' or how == 'void') and redis.call('HEXISTS', KEYS[2], ARGV[5]) == 0 then
  return 2
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local current = redis.call('HGET', KEYS[1], ARGV[1])
local state, untilMs, holders = nil, nil, nil
if current then state, untilMs, holders = string.match(current, '^(%a):(%d+):?([^:]*)$') end
if ARGV[5] ~= '' then
  if how == 'uncertain' then
    local a = redis.call('HGET', KEYS[2], ARGV[5])
    if a then
      local lease, rec = string.match(a, '^%a:%d+:(%d+):(.*)$')
      if rec then redis.call('HSET', KEYS[2], ARGV[5], 'u:' .. now .. ':' .. lease .. ':' .. rec) end
    end
  else
    redis.call('HDEL', KEYS[2], ARGV[5])
  end
end
if how == 'confirmed' then
  if state then
    redis.call('HSET', KEYS[1], ARGV[1], 'c:' .. untilMs)
  else
    local ttl = tonumber(ARGV[3])
    redis.call('HSET', KEYS[1], ARGV[1], 'c:' .. (now + ttl))
    if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
  end
  return 1
end
if how == 'void' then
  if state == 'u' then redis.call('HDEL', KEYS[1], ARGV[1]) return 1 end
  how = 'release'
end
if how == 'release' or how == 'landed' then
  if how == 'landed' and state == 'u' then
    redis.call('HSET', KEYS[1], ARGV[1], 'c:' .. untilMs)
  elseif state == 'p' then
    local rest, found = {}, false
    for h in string.gmatch(holders, '[^,]+') do
      if h == ARGV[4] then found = true else rest[#rest + 1] = h end
    end
    if found and #rest == 0 then
      redis.call('HDEL', KEYS[1], ARGV[1])
    elseif found then
      redis.call('HSET', KEYS[1], ARGV[1], 'p:' .. untilMs .. ':' .. table.concat(rest, ','))
    end
  end
elseif how == 'count' or state ~= 'c' then
  local ttl = tonumber(ARGV[3])
  local mark = 'u'
  if how == 'count' then mark = 'c' end
  redis.call('HSET', KEYS[1], ARGV[1], mark .. ':' .. (now + ttl))
  if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
end
return 1
`;

/** A bucket's attempts with Redis's clock: `{now, field, value, field, value, …}`. */
const LIST = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('HGETALL', KEYS[1])
table.insert(all, 1, tostring(now))
return all
`;

/** Holds an attempt nobody holds for ARGV[2] ms; its record, or nil. */
const CLAIM = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local a = redis.call('HGET', KEYS[1], ARGV[1])
if not a then return false end
local state, since, lease, rec = string.match(a, '^(%a):(%d+):(%d+):(.*)$')
if not state or tonumber(lease) > now then return false end
redis.call('HSET', KEYS[1], ARGV[1], state .. ':' .. since .. ':' .. (now + tonumber(ARGV[2])) .. ':' .. rec)
return rec
`;

const ATTEMPT_STATES = { s: "sending", u: "uncertain" } as const;

/** One kept attempt from its Redis value, or undefined if it is not one. */
function attemptOf(bucket: string, id: string, value: string): AttemptEntry | undefined {
  const match = /^([su]):(\d+):(\d+):(.*)$/s.exec(value);
  if (!match) return undefined;
  const [, state, since, lease, record] = match as unknown as [
    string,
    "s" | "u",
    string,
    string,
    string,
  ];
  return {
    bucket,
    id,
    record,
    state: ATTEMPT_STATES[state],
    since: Number(since),
    leaseUntil: Number(lease),
  };
}

const KINDS = new Set(["taken", "held", "full"]);

/** The script's reply, checked: anything else is garbage, and garbage decides nothing. */
function takeResultOf(reply: unknown): TakeResult {
  if (Array.isArray(reply) && reply.length === 4) {
    const [kind, ...numbers] = reply as unknown[];
    const [placed, uncertain, inFlight] = numbers.map(Number);
    const counts: SlotCounts | undefined = [placed, uncertain, inFlight].every(
      (n) => Number.isSafeInteger(n) && (n as number) >= 0,
    )
      ? { placed: placed as number, uncertain: uncertain as number, inFlight: inFlight as number }
      : undefined;
    const name = String(kind);
    if (counts && KINDS.has(name)) return { kind: name as TakeResult["kind"], ...counts };
  }
  throw new LimitsStoreError("the limits store answered something that is not a slot decision");
}

/** The Redis key of a bucket; the braces keep a bucket's keys in one cluster slot. */
const keyOf = (bucket: string): string => `korral:cap:{${bucket}}`;
/** The Redis key of a bucket's attempts, in the bucket's cluster slot. */
const ATTEMPTS = "korral:attempts:";
const attemptsKeyOf = (bucket: string): string => `${ATTEMPTS}{${bucket}}`;
const bucketOfAttemptsKey = (key: string): string | undefined =>
  /^korral:attempts:\{(.*)\}$/s.exec(key)?.[1];

export class RedisSlotBook implements SlotBook {
  constructor(
    private readonly client: RedisClient,
    private readonly deadline: <T>(answer: Promise<T>) => Promise<T>,
  ) {}

  take(
    bucket: string,
    name: string,
    limit: number,
    holder: string,
    attempt?: AttemptRecord,
  ): Promise<TakeResult> {
    return this.#decide(bucket, name, limit, "take", holder, attempt);
  }

  peek(bucket: string, name: string, limit: number): Promise<TakeResult> {
    return this.#decide(bucket, name, limit, "peek", "");
  }

  async settle(
    bucket: string,
    name: string,
    how: Settle,
    holder: string,
    attemptId?: string,
  ): Promise<boolean> {
    ready(this.client);
    const reply = Number(
      await this.deadline(
        this.client.eval(SETTLE, {
          keys: [keyOf(bucket), attemptsKeyOf(bucket)],
          arguments: [name, how, String(HOUR_MS), holder, attemptId ?? ""],
        }),
      ),
    );
    if (reply !== 1 && reply !== 2) {
      throw new LimitsStoreError("the limits store did not settle the slot");
    }
    return reply === 1;
  }

  async attempts(): Promise<{ now: number; entries: AttemptEntry[] }> {
    ready(this.client);
    const keys: string[] = [];
    const scan = this.client.scanIterator({ MATCH: `${ATTEMPTS}*`, COUNT: 500 });
    for (;;) {
      const batch = await this.deadline(scan.next());
      if (batch.done) break;
      keys.push(...batch.value.map(String));
    }
    let now = 0;
    const entries: AttemptEntry[] = [];
    for (const key of keys) {
      const bucket = bucketOfAttemptsKey(key);
      if (bucket === undefined) continue;
      const reply = await this.deadline(this.client.eval(LIST, { keys: [key], arguments: [] }));
      if (!Array.isArray(reply))
        throw new LimitsStoreError("the limits store did not list attempts");
      const [clock, ...fields] = reply.map(String);
      now = Number(clock);
      for (let i = 0; i + 1 < fields.length; i += 2) {
        const entry = attemptOf(bucket, fields[i] as string, fields[i + 1] as string);
        if (entry) entries.push(entry);
      }
    }
    if (now === 0) now = Date.now();
    return { now, entries };
  }

  async claim(bucket: string, id: string, leaseMs: number): Promise<string | undefined> {
    ready(this.client);
    const reply = await this.deadline(
      this.client.eval(CLAIM, { keys: [attemptsKeyOf(bucket)], arguments: [id, String(leaseMs)] }),
    );
    return typeof reply === "string" ? reply : undefined;
  }

  async #decide(
    bucket: string,
    name: string,
    limit: number,
    mode: "take" | "peek",
    holder: string,
    attempt?: AttemptRecord,
  ) {
    ready(this.client);
    const pendingMs = HOUR_MS + PENDING_MS;
    const reply = await this.deadline(
      this.client.eval(DECIDE, {
        keys: [keyOf(bucket), attemptsKeyOf(bucket)],
        arguments: [
          name,
          String(limit),
          mode,
          String(pendingMs),
          holder,
          String(pendingMs - SENDING_MS),
          String(MAX_HOLDERS),
          attempt?.id ?? "",
          attempt?.record ?? "",
          String(ATTEMPT_TTL_MS),
        ],
      }),
    );
    return takeResultOf(reply);
  }
}

/** The clients whose connection passed the eviction-policy check (until it drops). */
const checked = new WeakSet<RedisClient>();

/** Refuses at once while the connection is down or unchecked, rather than waiting out the deadline. */
function ready(client: RedisClient): void {
  if (!client.isReady || !checked.has(client)) {
    throw new LimitsStoreError("the limits store is not connected");
  }
}

/** The only policy under which Redis never evicts a key (the cap's slots have a TTL). */
const SAFE_POLICY = "noeviction";

/**
 * The store's `maxmemory_policy`, from INFO memory (Memorystore blocks CONFIG GET). An error
 * reply is a definite answer (`undefined`: not reported); a timeout or a dropped connection throws.
 */
async function evictionPolicyOf(
  client: RedisClient,
  deadline: <T>(answer: Promise<T>) => Promise<T>,
): Promise<string | undefined> {
  let info: string;
  try {
    info = String(await deadline(client.info("memory")));
  } catch (error) {
    if (error instanceof ErrorReply) return undefined;
    throw error;
  }
  return /^maxmemory_policy:([^\r\n]*)/m.exec(info)?.[1]?.trim();
}

function refusalFor(policy: string | undefined): string {
  const named = policy === undefined ? undefined : /^[a-z-]{1,40}$/.test(policy) ? policy : "?";
  const what =
    named === undefined
      ? "the limits store does not report its maxmemory-policy (INFO memory)"
      : `the limits store's maxmemory-policy is ${named}, which lets Redis evict the order cap's slots under memory pressure`;
  return `Invalid configuration: KORRAL_REDIS_URL: ${what}; set maxmemory-policy=noeviction on the instance (see DEPLOYMENT.md, "The limits store")`;
}

/** Connects in the background: the service starts, and serves reads, whatever Redis does. */
export function connectRedisLimits(options: RedisLimitsOptions): RedisLimits {
  const health = new LimitsHealth(options.warmupMs);
  const client = newClient(options);
  const deadline = <T>(answer: Promise<T>): Promise<T> => {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new LimitsStoreError(`no answer within ${options.timeoutMs} ms`)),
        options.timeoutMs,
      );
    });
    // The answer that comes after the deadline is dropped, never an unhandled rejection.
    answer.catch(() => {});
    return Promise.race([answer, late]).finally(() => clearTimeout(timer));
  };
  let refusal: string | undefined;
  let refuse: (line: string) => void = () => {};
  const refused = new Promise<string>((resolve) => {
    refuse = resolve;
  });
  const settled = new Set<() => void>();
  const wake = () => {
    for (const waiter of settled) waiter();
  };
  // Each new connection is checked before any slot is taken on it.
  let round = 0;
  const check = async (mine: number): Promise<void> => {
    let policy: string | undefined;
    try {
      policy = await evictionPolicyOf(client, deadline);
    } catch (error) {
      health.failed(describe(error));
      // Checked again shortly while this connection lasts; a new one starts its own check.
      if (mine === round && client.isReady) setTimeout(() => void check(mine), 1_000).unref();
      return;
    }
    if (mine !== round || refusal !== undefined) return;
    if (policy === SAFE_POLICY) {
      checked.add(client);
      health.connected();
      wake();
      return;
    }
    refusal = refusalFor(policy);
    client.destroy();
    refuse(refusal);
    wake();
  };
  client.on("error", (error: unknown) => {
    checked.delete(client);
    health.lost(describe(error));
  });
  client.on("ready", () => {
    checked.delete(client);
    round++;
    void check(round);
  });
  client.connect().catch((error: unknown) => health.lost(describe(error)));
  return {
    slots: new RedisSlotBook(client, deadline),
    client,
    health,
    deadline,
    describe,
    get refusal() {
      return refusal;
    },
    refused,
    async whenReady(ms) {
      if (checked.has(client) || refusal !== undefined) return;
      let timer: NodeJS.Timeout | undefined;
      let waiter: (() => void) | undefined;
      await new Promise<void>((resolve) => {
        timer = setTimeout(resolve, ms);
        waiter = resolve;
        settled.add(resolve);
      });
      clearTimeout(timer);
      if (waiter) settled.delete(waiter);
    },
    async close() {
      try {
        client.destroy();
      } catch {
        // Already closed.
      }
    },
  };
}

/** The kinds of failure the ops log names (limits/health.ts), by error class and code. */
const KIND_BY_CODE: ReadonlyArray<readonly [RegExp, string]> = [
  [/CERT|SELF_SIGNED|UNABLE_TO_|ALTNAME|^ERR_TLS|^ERR_SSL|^EPROTO$/, "tls"],
  [/^(WRONGPASS|NOAUTH|NOPERM)$/, "auth"],
  [/^ETIMEDOUT$/, "timeout"],
  [/^ECONNREFUSED$/, "refused"],
  [/^(EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN|EADDRNOTAVAIL)$/, "network"],
  [/^(ECONNRESET|EPIPE)$/, "closed"],
];

const KIND_BY_CLASS: Readonly<Record<string, string>> = {
  ConnectionTimeoutError: "timeout",
  SocketTimeoutError: "timeout",
  TimeoutError: "timeout",
  LimitsStoreError: "timeout",
  SocketClosedUnexpectedlyError: "closed",
};

/**
 * `kind: Class CODE`: the error's class, and its code when it has one (a system error's
 * `ECONNREFUSED`, a TLS error's `DEPTH_ZERO_SELF_SIGNED_CERT`, or the first word of a server's
 * error reply, `WRONGPASS`). A server's text beyond that word is never kept: a proxy that quotes
 * the command it refused would put the AUTH string in it. Our own errors' messages are ours.
 */
export function describe(error: unknown): string {
  if (!(error instanceof Error)) return "other: non-error";
  const className = /^[A-Za-z]{1,40}$/.test(error.constructor.name)
    ? error.constructor.name
    : "Error";
  let code: string | undefined;
  if (error instanceof ErrorReply) {
    code = /^[A-Z][A-Z_-]{1,30}(?=\s|$)/.exec(error.message)?.[0];
  } else {
    const own = (error as NodeJS.ErrnoException).code;
    if (typeof own === "string" && /^[A-Z][A-Z0-9_]{1,60}$/.test(own)) code = own;
  }
  let kind =
    (code && KIND_BY_CODE.find(([pattern]) => pattern.test(code))?.[1]) ??
    KIND_BY_CLASS[className] ??
    (error instanceof ErrorReply ? "reply" : "other");
  if (error instanceof LimitsStoreError && !error.message.startsWith("no answer")) {
    kind = error.message.includes("not connected") ? "unconnected" : "reply";
  }
  const detail = error instanceof LimitsStoreError ? `: ${error.message}` : "";
  return `${kind}: ${className}${code ? ` ${code}` : ""}${detail}`;
}
