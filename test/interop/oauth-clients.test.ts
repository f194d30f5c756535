import { rm } from "node:fs/promises";
import {
  Client,
  ClientCredentialsProvider,
  StreamableHTTPClientTransport,
  UnauthorizedError,
} from "@modelcontextprotocol/client";
import { UnauthorizedError as UnauthorizedErrorV1 } from "@modelcontextprotocol/sdk/client/auth.js";
import { ClientCredentialsProvider as ClientCredentialsProviderV1 } from "@modelcontextprotocol/sdk/client/auth-extensions.js";
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as TransportV1 } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { grantingAll, policyFile, tempWorkspace } from "../helpers/fixtures.js";
import { HERO_REASON } from "../helpers/harness.js";
import {
  AGENT,
  claimsOf,
  ORDER_SCOPE,
  READ_SCOPE,
  REPORTER,
  type RunningAs,
  startAuthorizationServer,
} from "../helpers/oauth-as.js";
import { browserFor, MemoryProvider } from "../helpers/oauth-client.js";
import { freePort, type Spawned, spawnDist, waitForHealthy } from "../helpers/spawn.js";

/**
 * The official SDK clients against the built server with KORRAL_AUTH=oauth and a real
 * authorization server: discovery driven by the 401, dynamic registration, authorization code
 * with PKCE and the resource indicator (a buyer signing in through the test's browser), and
 * client credentials (an agent, no person) with its step-up to the order scope; each then lists
 * the tools and calls a read: SDK v2 in both protocol eras, and SDK v1 (1.x), which buyers'
 * desktop clients still ship.
 */

let as: RunningAs;
let server: Spawned;
let resource: string;
let ws: Awaited<ReturnType<typeof tempWorkspace>>;

beforeAll(async () => {
  ws = await tempWorkspace();
  const port = await freePort();
  resource = `http://127.0.0.1:${port}/mcp`;
  as = await startAuthorizationServer({ resources: [resource] });
  // The buyer and both clients may use every store: the policy is not what this file tests.
  const policy = grantingAll(
    "user:alice@korral.example",
    `client:${AGENT.clientId}`,
    `client:${REPORTER.clientId}`,
  );
  server = spawnDist("http.js", {
    PORT: String(port),
    HOST: "127.0.0.1",
    KORRAL_KEYS_FILE: ws.keysFile,
    KORRAL_LOG_DIR: ws.logDir,
    KORRAL_AUTH: "oauth",
    KORRAL_OAUTH_ISSUER: as.issuer,
    KORRAL_OAUTH_RESOURCE: resource,
    KORRAL_POLICY_FILE: await policyFile(ws.dir, policy),
  });
  await waitForHealthy(server, `http://127.0.0.1:${port}/healthz`);
});

afterAll(async () => {
  await server?.stop();
  await as?.stop();
  if (ws) await rm(ws.dir, { recursive: true, force: true });
});

/** A tool result's structured content (SDK v1's result type is a union: read it by name). */
const structured = (result: object) =>
  ("structuredContent" in result ? result.structuredContent : undefined) as Record<string, unknown>;

/** A read as the signed-in caller, through either SDK's client: store 47's seeded stock. */
async function expectStockRead(client: {
  callTool(params: { name: string; arguments: Record<string, unknown> }): Promise<object>;
}): Promise<void> {
  const stock = structured(
    await client.callTool({
      name: "get_stock_position",
      arguments: { sku: "8847291", store_ids: ["47"] },
    }),
  );
  expect((stock.stores as { on_hand: number }[])[0]?.on_hand).toBe(3);
}

describe.each(["legacy", "auto"] as const)("SDK v2 client (versionNegotiation %s)", (mode) => {
  const options = { versionNegotiation: { mode } };

  it("authorization code + PKCE as the buyer: discovery, registration, sign-in, tools", async () => {
    const provider = new MemoryProvider();
    const first = new Client({ name: "buyer-desktop", version: "1.0.0" }, options);
    const transport = new StreamableHTTPClientTransport(new URL(resource), {
      authProvider: provider,
    });
    await expect(first.connect(transport)).rejects.toSatisfy(
      (error: { data?: { cause?: unknown } }) =>
        error instanceof UnauthorizedError || error?.data?.cause instanceof UnauthorizedError,
    );
    expect(provider.clientInformation()?.client_id, "dynamic registration ran").toBeDefined();
    const url = provider.authorizationUrl as URL;
    expect(url.searchParams.get("resource")).toBe(resource);
    expect(url.searchParams.get("code_challenge_method")).toBe("S256");
    // The 401's scope, not the metadata's whole list.
    expect(url.searchParams.get("scope")?.split(" ")).toContain(READ_SCOPE);
    expect(url.searchParams.get("scope")?.split(" ")).not.toContain(ORDER_SCOPE);

    const callback = await browserFor("alice")(url);
    expect(callback.get("iss")).toBe(as.issuer);
    await transport.finishAuth(callback);
    const token = provider.tokens()?.access_token as string;
    expect(claimsOf(token)).toMatchObject({ aud: resource, email: "alice@korral.example" });

    const client = new Client({ name: "buyer-desktop", version: "1.0.0" }, options);
    await client.connect(
      new StreamableHTTPClientTransport(new URL(resource), { authProvider: provider }),
    );
    const tools = await client.listTools();
    expect(tools.tools.map((t) => t.name)).toContain("get_stock_position");
    await expectStockRead(client);
    await client.close();
  });

  it("client credentials as an agent: tools, a read, then the write after its step-up", async () => {
    const provider = new ClientCredentialsProvider({
      clientId: AGENT.clientId,
      clientSecret: AGENT.clientSecret,
      expectedIssuer: as.issuer,
    });
    const client = new Client({ name: "replenishment-agent", version: "1.0.0" }, options);
    await client.connect(
      new StreamableHTTPClientTransport(new URL(resource), { authProvider: provider }),
    );
    const first = claimsOf(provider.tokens()?.access_token as string);
    expect(first).toMatchObject({ aud: resource, client_id: AGENT.clientId, scope: READ_SCOPE });
    expect((await client.listTools()).tools.length).toBe(4);
    const found = structured(
      await client.callTool({ name: "lookup_sku", arguments: { query: "butter" } }),
    );
    expect((found.matches as { sku: string }[])[0]?.sku).toBe("8847291");
    // The write answers 403 insufficient_scope; the SDK asks the AS for both scopes, retries once.
    const order = structured(
      await client.callTool({
        name: "create_replenishment_order",
        arguments: {
          store_id: "63",
          sku: "8847291",
          quantity: 6,
          reason: HERO_REASON,
        },
      }),
    );
    expect(order).toMatchObject({ mode: "submitted", store_id: "63", quantity: 6 });
    expect(order.order_id).toMatch(/^RPL-63-\d+$/);
    expect(claimsOf(provider.tokens()?.access_token as string).scope).toContain(ORDER_SCOPE);
    await client.close();
  });
});

it("a read-only agent cannot step up: the write fails without reaching the tool", async () => {
  const provider = new ClientCredentialsProvider({
    clientId: REPORTER.clientId,
    clientSecret: REPORTER.clientSecret,
    expectedIssuer: as.issuer,
  });
  const client = new Client({ name: "stock-report-job", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(resource), { authProvider: provider }),
  );
  await expect(
    client.callTool({
      name: "create_replenishment_order",
      arguments: { store_id: "47", sku: "8847291", quantity: 1, reason: HERO_REASON },
    }),
  ).rejects.toThrow();
  await client.close();
});

describe("SDK v1 client (@modelcontextprotocol/sdk 1.x)", () => {
  it("authorization code + PKCE as the buyer: discovery, registration, sign-in, a read", async () => {
    const provider = new MemoryProvider();
    const transport = new TransportV1(new URL(resource), { authProvider: provider });
    const first = new ClientV1({ name: "buyer-desktop-v1", version: "1.0.0" });
    await expect(first.connect(transport)).rejects.toBeInstanceOf(UnauthorizedErrorV1);
    expect(provider.clientInformation()?.client_id, "dynamic registration ran").toBeDefined();
    const url = provider.authorizationUrl as URL;
    expect(url.searchParams.get("resource")).toBe(resource);
    expect(url.searchParams.get("code_challenge_method")).toBe("S256");

    const callback = await browserFor("alice")(url);
    await transport.finishAuth(callback.get("code") ?? "");
    const token = provider.tokens()?.access_token as string;
    expect(claimsOf(token)).toMatchObject({ aud: resource, email: "alice@korral.example" });

    const client = new ClientV1({ name: "buyer-desktop-v1", version: "1.0.0" });
    await client.connect(new TransportV1(new URL(resource), { authProvider: provider }));
    await expectStockRead(client);
    await client.close();
  });

  it("client credentials as an agent: tools and a read", async () => {
    // SDK v1 asks the token endpoint for the scopes the provider is given, never the
    // challenge's: an agent on v1 names them.
    const provider = new ClientCredentialsProviderV1({
      clientId: AGENT.clientId,
      clientSecret: AGENT.clientSecret,
      scope: READ_SCOPE,
      expectedIssuer: as.issuer,
    });
    const client = new ClientV1({ name: "replenishment-agent-v1", version: "1.0.0" });
    await client.connect(new TransportV1(new URL(resource), { authProvider: provider }));
    expect(claimsOf(provider.tokens()?.access_token as string)).toMatchObject({
      aud: resource,
      client_id: AGENT.clientId,
      scope: READ_SCOPE,
    });
    expect((await client.listTools()).tools.length).toBe(4);
    const found = structured(
      await client.callTool({ name: "lookup_sku", arguments: { query: "butter" } }),
    );
    expect((found.matches as { sku: string }[])[0]?.sku).toBe("8847291");
    await client.close();
  });
});
