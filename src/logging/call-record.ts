import type { CallFields, TraceRecord } from "./records.js";
import type { TraceFields } from "./trace-context.js";

/** Who is calling, as the transport established it. */
export interface CallOrigin {
  /**
   * Who the call acts for, as every line says it (`by=`) and the store policy judges it: the
   * verified principal on HTTP with KORRAL_AUTH, else the unverified local one (policy/principal.ts).
   */
  readonly by: string;
  /** The OAuth client the verified token names (`client_id` / `azp`), if any. */
  readonly client: string | undefined;
  /** The IdP groups the verified token names, for the store policy's `idp_groups`. */
  readonly groups: readonly string[];
  /**
   * Keys the rate limit and binds confirmation state: the verified principal, else the HTTP
   * caller or the stdio connection.
   */
  readonly caller: string;
  /** The HTTP request's Cloud Trace fields ({} over stdio), for every line made on its behalf. */
  readonly traceFields: TraceFields;
}

/** An origin nothing verified (stdio, HTTP with KORRAL_AUTH=none): `by` is the local principal. */
export const unverifiedOrigin = (
  by: string,
  caller: string,
  traceFields: TraceFields = {},
): CallOrigin => ({ by, client: undefined, groups: [], caller, traceFields });

/** An origin from a verified token: its principal is who acts and what the limits count. */
export const verifiedOrigin = (
  token: { principal: string; clientId?: string | undefined; groups?: readonly string[] },
  traceFields: TraceFields,
): CallOrigin => ({
  by: token.principal,
  client: token.clientId,
  groups: token.groups ?? [],
  caller: token.principal,
  traceFields,
});

/**
 * The record of one tool call, built once where the call enters (mcp/call-tool.ts) and handed as
 * it is to the in-flight registry, the tool's context and every audit builder: what a line needs
 * to say about the call comes from here, never from arguments passed alongside.
 */
export interface CallRecord extends CallOrigin {
  readonly requestId: string;
  readonly tool: string;
  /** The arguments as the client sent them (unvalidated). */
  readonly args: unknown;
  readonly signal: AbortSignal;
  /** When the call began, as its trace line says. */
  readonly ts: string;
  /** performance.now() at the start, for its duration. */
  readonly started: number;
}

export function callRecord(
  origin: CallOrigin,
  requestId: string,
  tool: string,
  args: unknown,
  signal: AbortSignal | (() => AbortSignal),
): CallRecord {
  return new Call(origin, requestId, tool, args, signal);
}

/**
 * A CallRecord whose signal, when given as a function, is made when first asked for (see
 * CallOptions.signal). The getter lives on the prototype: every record has one shape (a getter
 * in an object literal would be a new accessor, so a new hidden class, per record, and every
 * read of a record's fields would stop being monomorphic).
 */
class Call implements CallRecord {
  readonly by: string;
  readonly client: string | undefined;
  readonly groups: readonly string[];
  readonly caller: string;
  readonly traceFields: TraceFields;
  readonly ts = new Date().toISOString();
  readonly started = performance.now();
  readonly #signal: AbortSignal | (() => AbortSignal);

  constructor(
    origin: CallOrigin,
    readonly requestId: string,
    readonly tool: string,
    readonly args: unknown,
    signal: AbortSignal | (() => AbortSignal),
  ) {
    this.by = origin.by;
    this.client = origin.client;
    this.groups = origin.groups;
    this.caller = origin.caller;
    this.traceFields = origin.traceFields;
    this.#signal = signal;
  }

  get signal(): AbortSignal {
    const signal = this.#signal;
    return typeof signal === "function" ? signal() : signal;
  }
}

/** What every line says of the call: the one place these fields are taken from the record. */
export const callFieldsOf = (call: CallRecord): CallFields => ({
  request_id: call.requestId,
  by: call.by,
  ...(call.client === undefined ? {} : { client: call.client }),
});

/** The call's trace line, with its outcome; its duration runs to now. */
export function traceOf(
  call: CallRecord,
  outcome: Pick<TraceRecord, "store_id" | "status" | "error">,
): TraceRecord {
  return {
    ts: call.ts,
    ...callFieldsOf(call),
    tool: call.tool,
    ...outcome,
    duration_ms: Math.round((performance.now() - call.started) * 100) / 100,
    args: call.args ?? {},
  };
}
