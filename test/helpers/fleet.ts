import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import type { EmulatorFaults } from "../../src/storelink-emulator.js";
import { type Child, startMcpHttpProcess, tempWorkspace } from "../e2e/processes.js";
import { type DelayedOrders, startDelayedEmulator } from "./delayed-emulator.js";
import { MCP_HEADERS, toolCall } from "./rpc.js";
import { currentScope, inScope } from "./spawn.js";

/**
 * A fleet as Cloud Run runs it: several built `dist/http.js` replicas in front of one StoreLink
 * (the emulator, in this process, so a test counts what reached it) and one limits store.
 */

export interface Fleet {
  replicas: Child[];
  storelink: DelayedOrders;
  storelinkUrl: string;
  /** The emulator's faults (dropOrders, lateOrders, ...), live: set one when a test needs it. */
  faults: EmulatorFaults;
  logDir: string;
  /** The environment every replica gets. */
  env: Record<string, string>;
  /** Starts one more replica (or a restarted one) with the fleet's environment. */
  start(extra?: Record<string, string>): Promise<Child>;
  close(): Promise<void>;
}

export async function startFleet(
  size: number,
  env: Record<string, string>,
  delayMs = 0,
): Promise<Fleet> {
  const ws = tempWorkspace({ ...SEED_ACCEPTED_KEYS });
  const emulator = await startDelayedEmulator(delayMs);
  const fleetEnv = {
    STORELINK_URL: emulator.baseUrl,
    KORRAL_KEYS_FILE: ws.keysFile,
    KORRAL_LOG_DIR: ws.logDir,
    // The store's deadline is not what these tests are about: on a loaded machine the default
    // 300 ms would turn some answers into limits_unavailable. Tests of the deadline set it.
    KORRAL_REDIS_TIMEOUT_MS: "5000",
    ...env,
  };
  const started: Child[] = [];
  // A replica started later (a restart, in a test) is the fleet's, as long-lived as the fleet.
  const scope = currentScope();
  const start = async (extra: Record<string, string> = {}) => {
    const child = await inScope(scope, () => startMcpHttpProcess({ ...fleetEnv, ...extra }));
    started.push(child);
    return child;
  };
  const replicas = await Promise.all(Array.from({ length: size }, () => start()));
  return {
    replicas,
    storelink: emulator.storelink,
    storelinkUrl: emulator.baseUrl,
    faults: emulator.faults,
    logDir: ws.logDir,
    env: fleetEnv,
    start,
    async close() {
      await Promise.all(started.map((child) => child.stop()));
      await emulator.close();
      ws.cleanup();
    },
  };
}

let seq = 0;

/** One stateless 2025-era tools/call POST, as a client of the service sends it. */
export async function call(
  baseUrl: string,
  name: string,
  args: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<CallToolResult> {
  const res = await fetch(new URL("/mcp", baseUrl), {
    method: "POST",
    headers: { ...MCP_HEADERS, ...headers },
    body: JSON.stringify(toolCall(++seq, name, args)),
  });
  const body = (await res.json()) as { result?: CallToolResult; error?: unknown };
  if (!body.result) throw new Error(`no result: ${res.status} ${JSON.stringify(body)}`);
  return body.result;
}

/** "ok", or the error type of a failed call. */
export const outcomeOf = (result: CallToolResult): string =>
  result.isError
    ? String((result.structuredContent as { error?: { type?: string } }).error?.type)
    : "ok";
