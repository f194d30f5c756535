import { createClient } from "redis";
import { LimitsHealth } from "./health.js";
import {
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
 * - The URL and its password never leave this module: errors are described by `describe`.
 */

export interface RedisLimitsOptions {
  url: string;
  /** The deadline of each command, and of a connection attempt. */
  timeoutMs: number;
}

/** A connected (or connecting) limits store. */
export interface RedisLimits {
  slots: SlotBook;
  /** The client, for the shared rate limit (policy/rate-limit.ts). */
  client: RedisClient;
  health: LimitsHealth;
  /** `answer`, or a LimitsStoreError once the deadline has passed without it. */
  deadline<T>(answer: Promise<T>): Promise<T>;
  /** Resolves once connected, or after `ms` whatever happened (start-up waits this long). */
  whenReady(ms: number): Promise<void>;
  /** Strips the URL and its password from an error, for the ops log. */
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
return {kind, placed, uncertain, inflight}
`;

/** The settle rules of limits/slots.ts, on Redis's clock. */
const SETTLE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local current = redis.call('HGET', KEYS[1], ARGV[1])
local state, untilMs, holders = nil, nil, nil
if current then state, untilMs, holders = string.match(current, '^(%a):(%d+):?([^:]*)$') end
local how = ARGV[2]
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

/** The Redis key of a bucket; the braces keep a bucket's key in one cluster slot. */
const keyOf = (bucket: string): string => `korral:cap:{${bucket}}`;

export class RedisSlotBook implements SlotBook {
  constructor(
    private readonly client: RedisClient,
    private readonly deadline: <T>(answer: Promise<T>) => Promise<T>,
  ) {}

  take(bucket: string, name: string, limit: number, holder: string): Promise<TakeResult> {
    return this.#decide(bucket, name, limit, "take", holder);
  }

  peek(bucket: string, name: string, limit: number): Promise<TakeResult> {
    return this.#decide(bucket, name, limit, "peek", "");
  }

  async settle(bucket: string, name: string, how: Settle, holder: string): Promise<void> {
    ready(this.client);
    const reply = await this.deadline(
      this.client.eval(SETTLE, {
        keys: [keyOf(bucket)],
        arguments: [name, how, String(HOUR_MS), holder],
      }),
    );
    if (Number(reply) !== 1) throw new LimitsStoreError("the limits store did not settle the slot");
  }

  async #decide(
    bucket: string,
    name: string,
    limit: number,
    mode: "take" | "peek",
    holder: string,
  ) {
    ready(this.client);
    const pendingMs = HOUR_MS + PENDING_MS;
    const reply = await this.deadline(
      this.client.eval(DECIDE, {
        keys: [keyOf(bucket)],
        arguments: [
          name,
          String(limit),
          mode,
          String(pendingMs),
          holder,
          String(pendingMs - SENDING_MS),
          String(MAX_HOLDERS),
        ],
      }),
    );
    return takeResultOf(reply);
  }
}

/** Refuses at once while the connection is down, rather than waiting out the deadline. */
function ready(client: RedisClient): void {
  if (!client.isReady) throw new LimitsStoreError("the limits store is not connected");
}

/** Connects in the background: the service starts, and serves reads, whatever Redis does. */
export function connectRedisLimits(options: RedisLimitsOptions): RedisLimits {
  const secrets = secretsOf(options.url);
  const describe = (error: unknown): string => {
    const code = (error as NodeJS.ErrnoException | null)?.code;
    let text =
      error instanceof Error
        ? `${error.name}${code ? ` ${code}` : ""}: ${error.message}`
        : String(error);
    for (const secret of secrets) text = text.split(secret).join("[REDACTED]");
    return text.slice(0, 300);
  };
  const health = new LimitsHealth();
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
  client.on("error", (error: unknown) => health.failed(describe(error)));
  client.on("ready", () => health.answered());
  client.connect().catch((error: unknown) => health.failed(describe(error)));
  return {
    slots: new RedisSlotBook(client, deadline),
    client,
    health,
    deadline,
    describe,
    async whenReady(ms) {
      if (client.isReady) return;
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        timer = setTimeout(resolve, ms);
        client.once("ready", resolve);
      });
      clearTimeout(timer);
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

/** The URL, its password and user, raw and decoded: every form a library's error could quote. */
function secretsOf(url: string): string[] {
  const forms = [url];
  try {
    const parsed = new URL(url);
    for (const part of [parsed.password, parsed.username]) {
      if (part !== "") forms.push(part, decodeURIComponent(part));
    }
  } catch {
    // config.ts validated the URL; nothing more to strip.
  }
  return forms.filter((form) => form.length >= 3);
}
