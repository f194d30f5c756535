import { hash, randomBytes } from "node:crypto";
import { createRequestStateCodec } from "@modelcontextprotocol/server";

/** How long the buyer has to answer a 2026-07-28 confirmation before it must be asked again. */
export const REQUEST_STATE_TTL_SECONDS = 300;

/**
 * What a round-1 `requestState` proves, and nothing more: that this server, for this caller,
 * asked the buyer about exactly these order fields (`args`, a digest) within the TTL. `nonce`
 * makes each ask unique; when the agent gave no idempotency key, the write's key is derived from
 * it, so StoreLink folds every replay of the same state into one order, on any replica.
 */
export interface OrderState {
  nonce: string;
  args: string;
}

/** The order fields a confirmation is bound to; anything else may differ between rounds. */
export interface BoundOrder {
  store_id: string;
  sku: string;
  quantity: number;
  reason: string;
  idempotency_key?: string | undefined;
}

export function orderDigest(order: BoundOrder): string {
  const fields = [order.store_id, order.sku, order.quantity, order.reason, order.idempotency_key];
  return hash("sha256", JSON.stringify(fields), "base64url");
}

export const newNonce = (): string => randomBytes(16).toString("hex");

/** The idempotency key of a confirmed write whose agent sent none. */
export const nonceIdempotencyKey = (nonce: string): string => `mcp-confirm-${nonce}`;

/**
 * Signs and checks round-1 state with the SDK's HMAC codec. `caller` binds it to whoever asked
 * (on HTTP the caller identity, on stdio the connection), never to a host, port or replica, so
 * any replica holding the same key accepts it.
 */
export interface StateSigner {
  mint(state: OrderState, caller: string): Promise<string>;
  /** Throws on tampered, expired or malformed state. */
  verify(wire: string): Promise<SignedState>;
  /** Whether verified state was minted for `caller`. */
  isCaller(state: SignedState, caller: string): boolean;
  /** Whether the key is this process's own (replicas will not accept each other's state). */
  readonly ephemeral: boolean;
}

/**
 * `key` signs and checks; `previous` (a key being rotated out) only checks, so state minted
 * before a roll is still accepted by replicas that already have the new key.
 */
export function stateSigner(key: string | undefined, previous?: string): StateSigner {
  const current = codecOf(key === undefined ? randomBytes(32) : Buffer.from(key, "utf8"));
  const older = previous === undefined ? undefined : codecOf(Buffer.from(previous, "utf8"));
  const open = async (wire: string): Promise<unknown> => {
    try {
      // The codec's context argument is only read by a `bind` hook, which this codec has none of.
      return await current.verify(wire, undefined as never);
    } catch (error) {
      // Expired under the current key is expired; anything else may be the previous key's.
      if (older === undefined || (error instanceof Error && error.message === "expired")) {
        throw error;
      }
      return older.verify(wire, undefined as never);
    }
  };
  return {
    ephemeral: key === undefined,
    mint: (state, caller) => current.mint({ ...state, caller: callerDigest(caller) }),
    async verify(wire) {
      const state = (await open(wire)) as Partial<SignedState> | null;
      if (
        state === null ||
        typeof state !== "object" ||
        typeof state.nonce !== "string" ||
        typeof state.args !== "string" ||
        typeof state.caller !== "string"
      ) {
        throw new Error("malformed");
      }
      return state as SignedState;
    },
    isCaller: (state, caller) => state.caller === callerDigest(caller),
  };
}

function codecOf(bytes: Buffer) {
  if (bytes.length < 32) throw new RangeError("the request-state key must be at least 32 bytes");
  return createRequestStateCodec<SignedState>({
    key: new Uint8Array(bytes),
    ttlSeconds: REQUEST_STATE_TTL_SECONDS,
  });
}

/** The caller as the state carries it: the client can read the payload, so never in clear. */
const callerDigest = (caller: string): string =>
  hash("sha256", `korral-caller:${caller}`, "base64url");

type SignedState = OrderState & { caller: string };
