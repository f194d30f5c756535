import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import {
  type CallToolResult,
  type ClientCapabilities,
  type ElicitRequest,
  ElicitRequestSchema,
  type ElicitResult,
} from "@modelcontextprotocol/sdk/types.js";
import { composeDeps } from "../../src/deps.js";
import { ApiKey } from "../../src/keys/api-key.js";
import type { StoreKeyProvider } from "../../src/keys/provider.js";
import type {
  AuditRecord,
  CallRecorder,
  IntentRecord,
  TraceRecord,
} from "../../src/logging/records.js";
import { createServer } from "../../src/mcp/server.js";
import { OrderCap } from "../../src/policy/order-cap.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import type { Deps } from "../../src/tools/define.js";

/** A key provider over a mutable map, counting lookups; the seam the spec names. */
export class MapKeyProvider implements StoreKeyProvider {
  readonly lookups: { storeId: string; fresh: boolean }[] = [];
  constructor(public keys: Record<string, string> = { ...SEED_ACCEPTED_KEYS }) {}
  async getKey(storeId: string, options?: { fresh?: boolean }): Promise<ApiKey | undefined> {
    this.lookups.push({ storeId, fresh: options?.fresh === true });
    const value = this.keys[storeId];
    return value === undefined ? undefined : new ApiKey(value);
  }
}

/** Keeps every trace and audit record in memory for assertions. */
export class MemoryRecorder implements CallRecorder {
  readonly traces: TraceRecord[] = [];
  readonly audits: AuditRecord[] = [];
  trace(record: TraceRecord): void {
    this.traces.push(record);
  }
  async audit(record: AuditRecord): Promise<undefined> {
    this.audits.push(record);
    return undefined;
  }
  readonly intents: IntentRecord[] = [];
  intend(intent: IntentRecord): void {
    this.intents.push(intent);
  }
}

export interface Harness {
  client: Client;
  deps: Deps;
  recorder: MemoryRecorder;
  call(name: string, args: unknown): Promise<CallToolResult>;
  close(): Promise<void>;
}

export interface ClientOptions {
  /** What the test client declares, e.g. `{ elicitation: { form: {} } }`. */
  capabilities?: ClientCapabilities;
  /** Answers the server's elicitation/create requests (needs `capabilities.elicitation`). */
  onElicit?: (request: ElicitRequest) => ElicitResult | Promise<ElicitResult>;
}

/** The real SDK Client over InMemoryTransport against createServer(): the protocol is exercised. */
export async function connect(
  overrides: Partial<Deps> = {},
  options: ClientOptions = {},
): Promise<Harness> {
  const recorder = new MemoryRecorder();
  const deps = composeDeps({
    ...overrides,
    storelink: overrides.storelink ?? new InMemoryStoreLink(),
    keys: overrides.keys ?? new MapKeyProvider(),
    recorder: overrides.recorder ?? recorder,
    // The loop guard is off unless a test passes one: tests that place many orders for the same
    // store and SKU are not about it. test/protocol/write-safety.test.ts covers it.
    orderCap: overrides.orderCap ?? new OrderCap({ perHour: 0 }),
  });
  const server = createServer(deps);
  const [clientTransport, serverTransport] = InMemoryTransport.createLinkedPair();
  const client = new Client(
    { name: "test-client", version: "1.0.0" },
    { capabilities: options.capabilities ?? {} },
  );
  const onElicit = options.onElicit;
  if (onElicit) client.setRequestHandler(ElicitRequestSchema, (request) => onElicit(request));
  await Promise.all([server.connect(serverTransport), client.connect(clientTransport)]);
  // As real clients do: the SDK Client then validates every structuredContent, errors included,
  // against the advertised outputSchema.
  await client.listTools();
  return {
    client,
    deps,
    recorder,
    call: (name, args) =>
      client.callTool({
        name,
        arguments: args as Record<string, unknown>,
      }) as Promise<CallToolResult>,
    close: async () => {
      await client.close();
      await server.close();
    },
  };
}

/** The structured error of a failed call, asserting it is one. */
export function errorOf(result: CallToolResult): {
  type: string;
  message: string;
  next_step: string;
  retryable: boolean;
} {
  if (result.isError !== true) throw new Error(`expected isError, got ${JSON.stringify(result)}`);
  const error = (result.structuredContent as { error?: unknown } | undefined)?.error;
  if (!error) throw new Error(`no structuredContent.error in ${JSON.stringify(result)}`);
  return error as ReturnType<typeof errorOf>;
}

export const HERO_REASON =
  "Gap of 8 units at store 47 over 24h: on_hand 3 vs 11 sold. Buyer approved 24.";
