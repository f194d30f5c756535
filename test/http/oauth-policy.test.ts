import { existsSync, readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDelayedEmulator, until } from "../helpers/delayed-emulator.js";
import { policyFile, tempWorkspace, undoAfterEach } from "../helpers/fixtures.js";
import { HERO_REASON } from "../helpers/harness.js";
import {
  AGENT,
  ORDER_SCOPE,
  READ_SCOPE,
  type RunningAs,
  type ServiceClient,
  startAuthorizationServer,
} from "../helpers/oauth-as.js";
import {
  type RecordingStoreLink,
  startRecordingStoreLink,
} from "../helpers/recording-storelink.js";
import { MCP_HEADERS, modernHeaders, modernMeta, toolCall } from "../helpers/rpc.js";
import { freePort, type Spawned, spawnDist, waitForHealthy } from "../helpers/spawn.js";

/**
 * The store policy with verified callers, through the built server (dist/http.js), a real
 * authorization server and StoreLink over HTTP (the emulator, every request it receives
 * recorded): a store the principal may not read is its own entry and StoreLink is never asked
 * for it; a write for a store it may not order for is audited REJECTED with who, and nothing
 * reaches StoreLink; IdP groups from the token's claim grant through `idp_groups`; a 2026-07-28
 * confirmation minted for one principal is refused to another; and the UNCERTAIN line recovery
 * writes after a kill -9 of an authenticated write says who.
 */

/** A second agent allowed what the first is: only the confirmation's binding tells them apart. */
const NIGHT: ServiceClient = {
  clientId: "night-agent",
  clientSecret: "night-secret-for-tests-only",
  scope: `${READ_SCOPE} ${ORDER_SCOPE}`,
};
/** A report job the policy names nowhere: its IdP group alone grants it store 102. */
const DAIRY: ServiceClient = {
  clientId: "dairy-report-job",
  clientSecret: "dairy-secret-for-tests-only",
  scope: READ_SCOPE,
  groups: ["korral-dairy-buyers", "someone else's group"],
};

const POLICY = {
  version: 1,
  mode: "enforce",
  groups: {
    brno: { read: { stores: ["47", "63"] }, order: { stores: ["47"] } },
    "dairy-read": { read: { stores: ["102"] } },
  },
  principals: {
    [`client:${AGENT.clientId}`]: ["brno"],
    [`client:${NIGHT.clientId}`]: ["brno"],
  },
  idp_groups: { "korral-dairy-buyers": ["dairy-read"] },
};

let as: RunningAs;
let storelink: RecordingStoreLink;
let server: Spawned;
let base: string;
let resource: string;
/** The resource of the server the kill -9 test starts. */
let killedResource: string;
let killedPort: number;
let ws: Awaited<ReturnType<typeof tempWorkspace>>;
let policy: string;

/** The server's environment, for `resource` over the StoreLink at `storelinkUrl`. */
const envFor = (resourceUrl: string, storelinkUrl: string, logDir: string) => ({
  HOST: "127.0.0.1",
  PORT: new URL(resourceUrl).port,
  STORELINK_URL: storelinkUrl,
  KORRAL_KEYS_FILE: ws.keysFile,
  KORRAL_LOG_DIR: logDir,
  KORRAL_AUTH: "oauth",
  KORRAL_OAUTH_ISSUER: as.issuer,
  KORRAL_OAUTH_RESOURCE: resourceUrl,
  KORRAL_OAUTH_GROUPS_CLAIM: "groups",
  KORRAL_POLICY_FILE: policy,
  KORRAL_RATE_LIMIT_PER_MIN: "0",
});

beforeAll(async () => {
  ws = await tempWorkspace();
  policy = await policyFile(ws.dir, POLICY);
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  resource = `${base}/mcp`;
  killedPort = await freePort();
  killedResource = `http://127.0.0.1:${killedPort}/mcp`;
  as = await startAuthorizationServer({
    resources: [resource, killedResource],
    clients: [AGENT, NIGHT, DAIRY],
  });
  storelink = await startRecordingStoreLink();
  server = spawnDist("http.js", envFor(resource, storelink.url, ws.logDir));
  await waitForHealthy(server, `${base}/healthz`);
});

afterAll(async () => {
  await server?.stop();
  await storelink?.close();
  await as?.stop();
  if (ws) await rm(ws.dir, { recursive: true, force: true });
});

const { defer } = undoAfterEach();

interface Answer {
  resultType?: string;
  requestState?: string;
  isError?: boolean;
  structuredContent?: {
    stores?: { store_id: string; status: string; error?: { type: string; message: string } }[];
    order_id?: string;
    error?: { type: string; message: string };
  };
}

async function call(
  client: ServiceClient,
  body: unknown,
  headers: Record<string, string> = MCP_HEADERS,
): Promise<Answer> {
  const token = await as.tokenFor(client, resource);
  const res = await fetch(`${base}/mcp`, {
    method: "POST",
    headers: { ...headers, authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { result: Answer }).result;
}

const auditLines = (logDir = ws.logDir): string[] => {
  const file = join(logDir, "audit.log");
  return existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean) : [];
};

/** StoreLink requests that name `store` (its stock, its orders). */
const requestsFor = (store: string) =>
  storelink.requests.filter((r) => r.target.startsWith(`/v1/stores/${store}/`));

const ORDER = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };

describe("the store policy with verified callers", () => {
  it("a store the principal may not read is its own not_permitted entry; StoreLink is never asked for it", async () => {
    const result = await call(
      AGENT,
      toolCall(1, "get_stock_position", { sku: "8847291", store_ids: ["47", "102"] }),
    );
    expect(result.isError).toBeFalsy();
    const stores = result.structuredContent?.stores ?? [];
    expect(stores.map((s) => [s.store_id, s.status])).toEqual([
      ["47", "ok"],
      ["102", "error"],
    ]);
    expect(stores[1]?.error?.type).toBe("not_permitted");
    expect(stores[1]?.error?.message).toContain(`client:${AGENT.clientId}`);
    expect(stores[1]?.error?.message).toContain("Ask Korral IT for access");
    expect(requestsFor("47").length).toBeGreaterThan(0);
    expect(requestsFor("102")).toEqual([]);
  });

  it("every store refused: a whole-call error, and StoreLink asked for none of them", async () => {
    const result = await call(
      AGENT,
      toolCall(1, "get_stock_position", { sku: "8847291", store_ids: ["102", "111"] }),
    );
    expect(result.isError).toBe(true);
    expect(result.structuredContent?.error?.type).toBe("not_permitted");
    expect([...requestsFor("102"), ...requestsFor("111")]).toEqual([]);
  });

  it("a write for a store the principal may not order for: REJECTED with who, no StoreLink request at all", async () => {
    const before = storelink.requests.length;
    const audited = auditLines().length;
    for (const dry_run of [false, true]) {
      const result = await call(
        AGENT,
        toolCall(1, "create_replenishment_order", { ...ORDER, store_id: "63", dry_run }),
      );
      expect(result.structuredContent?.error?.type).toBe("not_permitted");
    }
    expect(storelink.requests.slice(before)).toEqual([]);
    const lines = auditLines().slice(audited);
    expect(lines).toHaveLength(2);
    for (const line of lines) {
      expect(line).toMatch(/ REJECTED - store=63 sku=8847291 qty=24 req=req_\w+ /);
      expect(line).toContain(` by=client:${AGENT.clientId} client=${AGENT.clientId} `);
      expect(line).toContain("may not order for store 63");
    }
  });

  it("IdP groups from the token's claim grant through idp_groups (the policy names no such principal)", async () => {
    const result = await call(
      DAIRY,
      toolCall(1, "get_stock_position", { sku: "8847291", store_ids: ["102", "47"] }),
    );
    const stores = result.structuredContent?.stores ?? [];
    expect(stores.map((s) => [s.store_id, s.status])).toEqual([
      ["102", "ok"],
      ["47", "error"],
    ]);
    expect(stores[1]?.error?.type).toBe("not_permitted");
  });
});

describe("a 2026-07-28 confirmation is bound to the principal it was minted for", () => {
  const round = (state?: string, answer?: unknown) => {
    const params: Record<string, unknown> = {
      name: "create_replenishment_order",
      arguments: { ...ORDER, quantity: 12 },
      _meta: modernMeta({ elicitation: { form: {} } }, "raw"),
    };
    if (state !== undefined) params.requestState = state;
    if (answer !== undefined) params.inputResponses = { confirm: answer };
    return { jsonrpc: "2.0", id: 1, method: "tools/call", params };
  };
  const headers = modernHeaders("tools/call", "create_replenishment_order");
  const YES = { action: "accept", content: { confirm: true } };
  const creates = () => storelink.requests.filter((r) => r.method === "POST");

  it("another principal answering it is refused not_confirmed, nothing sent; its own principal's answer places the order", async () => {
    const first = await call(AGENT, round(), headers);
    expect(first.resultType).toBe("input_required");
    const state = first.requestState as string;
    expect(typeof state).toBe("string");
    const audited = auditLines().length;

    const stolen = await call(NIGHT, round(state, YES), headers);
    expect(stolen.isError).toBe(true);
    expect(stolen.structuredContent?.error?.type).toBe("not_confirmed");
    expect(stolen.structuredContent?.error?.message).toContain("issued to another caller");
    expect(creates()).toEqual([]);
    const refused = auditLines().slice(audited);
    expect(refused).toHaveLength(1);
    expect(refused[0]).toMatch(/ REJECTED - store=47 /);
    expect(refused[0]).toContain(` by=client:${NIGHT.clientId} `);

    // The same state, answered by the principal it was minted for, is good: the refusal was
    // the principal's.
    const own = await call(AGENT, round(state, YES), headers);
    expect(own.structuredContent?.order_id).toMatch(/^RPL-47-\d{3}$/);
    expect(creates()).toHaveLength(1);
  });
});

describe("kill -9 while an authenticated write is at StoreLink", () => {
  it("the UNCERTAIN line the next start writes says who, and so does its reconciler's RESOLVED line", async () => {
    const held = await startDelayedEmulator("held");
    defer(() => held.close());
    const logDir = join(ws.dir, "killed-log");
    const env = envFor(killedResource, held.baseUrl, logDir);
    const killed = spawnDist("http.js", env);
    defer(() => killed.stop());
    await waitForHealthy(killed, `http://127.0.0.1:${killedPort}/healthz`);
    const token = await as.tokenFor(AGENT, killedResource);
    // Never answered: the process dies with the write at StoreLink.
    void fetch(killedResource, {
      method: "POST",
      headers: { ...MCP_HEADERS, authorization: `Bearer ${token}` },
      body: JSON.stringify(toolCall(1, "create_replenishment_order", ORDER)),
    }).catch(() => {});
    await until(() => held.storelink.received === 1, "the create to reach StoreLink");
    killed.child.kill("SIGKILL");
    await killed.exit;
    expect(auditLines(logDir)).toEqual([]);
    // StoreLink finishes the create its writer never heard back from.
    held.storelink.release();
    await until(() => held.storelink.created.length === 1, "the held create to land");

    // The next start on this log directory audits it, and its reconciler resolves it by the key.
    const next = spawnDist("stdio.js", env);
    defer(() => next.stop());
    const has = (outcome: string) => (l: string) => l.includes(` ${outcome} `);
    await until(() => auditLines(logDir).some(has("RESOLVED")), "the reconciler's RESOLVED line");
    next.child.stdin?.end();
    expect(await next.exit).toBe(0);
    const lines = auditLines(logDir);
    expect(lines).toHaveLength(2);
    const [uncertain, resolved] = lines;
    expect(uncertain).toMatch(
      / UNCERTAIN - store=47 sku=8847291 qty=24 req=req_\w+ by=client:\S+ key=korral-[0-9a-f-]{36} client=/,
    );
    expect(uncertain).toContain(` by=client:${AGENT.clientId} `);
    expect(uncertain).toContain(` client=${AGENT.clientId} `);
    expect(uncertain).toContain('detail="the server was stopped (killed)');
    // The same attempt (request id and key), the same principal, CREATED.
    const req = uncertain?.match(/ req=(\S+) /)?.[1];
    const key = uncertain?.match(/ key=(\S+) /)?.[1];
    expect(resolved).toMatch(/ RESOLVED RPL-47-001 store=47 sku=8847291 qty=24 /);
    expect(resolved).toContain(` req=${req} by=client:${AGENT.clientId} key=${key} `);
    expect(resolved).toContain(` client=${AGENT.clientId} `);
    expect(resolved).toContain(" outcome=CREATED ");
  });
});
