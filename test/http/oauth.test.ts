import { readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
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
import { MCP_HEADERS, toolCall } from "../helpers/rpc.js";
import { freePort, type Spawned, spawnDist, waitForHealthy } from "../helpers/spawn.js";

/**
 * KORRAL_AUTH=oauth through the built server (dist/http.js) and a real authorization server
 * (oidc-provider, a child process): the 401 and its challenge, both metadata documents, the
 * token matrix, the read scope on every call and the order scope on the write (in a batch too, each
 * refused write audited with who), and the token in no output.
 */

let as: RunningAs;
let server: Spawned;
let port: number;
let base: string;
let resource: string;
/** A second server of the same issuer, with a rate limit of one call a minute. */
let limitedPort: number;
let ws: Awaited<ReturnType<typeof tempWorkspace>>;
/** Both clients may use every store: the policy is not what this file tests. */
let policy: string;
const OTHER_RESOURCE = "http://127.0.0.1:1/some-other-api";
/** Every token this file sends: none may appear in any output. */
const sent = new Set<string>();

beforeAll(async () => {
  ws = await tempWorkspace();
  policy = await policyFile(
    ws.dir,
    grantingAll(`client:${AGENT.clientId}`, `client:${REPORTER.clientId}`),
  );
  port = await freePort();
  base = `http://127.0.0.1:${port}`;
  resource = `${base}/mcp`;
  limitedPort = await freePort();
  as = await startAuthorizationServer({
    resources: [resource, OTHER_RESOURCE, `http://127.0.0.1:${limitedPort}/mcp`],
  });
  server = spawnDist("http.js", {
    PORT: String(port),
    HOST: "127.0.0.1",
    KORRAL_KEYS_FILE: ws.keysFile,
    KORRAL_LOG_DIR: ws.logDir,
    // Every line the server can write, so "the token in no output" covers the most.
    LOG_LEVEL: "debug",
    KORRAL_AUTH: "oauth",
    KORRAL_OAUTH_ISSUER: as.issuer,
    KORRAL_OAUTH_RESOURCE: resource,
    KORRAL_POLICY_FILE: policy,
    KORRAL_RATE_LIMIT_PER_MIN: "0",
  });
  await waitForHealthy(server, `${base}/healthz`);
});

afterAll(async () => {
  await server?.stop();
  await as?.stop();
  if (ws) await rm(ws.dir, { recursive: true, force: true });
});

type Headers = Record<string, string>;

/** The audit log's lines so far. */
const auditLines = async (): Promise<string[]> =>
  (await readFile(join(ws.logDir, "audit.log"), "utf8").catch(() => ""))
    .split("\n")
    .filter(Boolean);

async function post(body: unknown, token?: string, headers: Headers = {}) {
  if (token) sent.add(token);
  const res = await fetch(`${base}/mcp`, {
    method: "POST",
    headers: { ...MCP_HEADERS, ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
    body: JSON.stringify(body),
  });
  return {
    status: res.status,
    challenge: res.headers.get("www-authenticate"),
    text: await res.text(),
  };
}

const LIST = { jsonrpc: "2.0", id: 1, method: "tools/list", params: {} };
const ORDER = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };

describe("KORRAL_AUTH=oauth: the challenge and the metadata", () => {
  it("a call without a token is 401 with the challenge; its URL is the configured one, not the Host's", async () => {
    // localhost is an allowed Host: the challenge still names the configured resource's host.
    const res = await post(LIST, undefined, { host: `localhost:${port}` });
    expect(res.status).toBe(401);
    expect(res.challenge).toMatch(/^Bearer /);
    expect(res.challenge).toContain(
      `resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`,
    );
    expect(res.challenge).toContain(`scope="${READ_SCOPE}"`);
    expect(res.challenge).toContain('error="invalid_token"');
  });

  it.each(["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"])(
    "serves the RFC 9728 document at %s",
    async (path) => {
      const res = await fetch(`${base}${path}`, { headers: { host: `localhost:${port}` } });
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({
        resource,
        authorization_servers: [as.issuer],
        scopes_supported: [READ_SCOPE, ORDER_SCOPE],
      });
    },
  );
});

describe("KORRAL_AUTH=oauth: the token matrix", () => {
  it("accepts a token of the issuer for this resource", async () => {
    const token = await as.tokenFor(REPORTER, resource);
    const res = await post(LIST, token);
    expect(res.status).toBe(200);
    expect(res.text).toContain("lookup_sku");
    // The fast path's read, too.
    const read = await post(toolCall(2, "lookup_sku", { query: "butter" }), token);
    expect(read.status).toBe(200);
    expect(read.text).toContain("8847291");
  });

  it("refuses every token that is not exactly that, with 401 and the challenge", async () => {
    const good = await as.tokenFor(REPORTER, resource);
    const [h, p, s] = good.split(".") as [string, string, string];
    const claims = claimsOf(good);
    const now = Math.floor(Date.now() / 1000);
    const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url");
    const { createHmac } = await import("node:crypto");
    // HMAC "signed" with the AS's public key (the classic algorithm confusion).
    const hmacHeader = encode({ alg: "HS256", typ: "at+jwt", kid: as.publicJwk.kid });
    const hmac = `${hmacHeader}.${p}.${createHmac("sha256", JSON.stringify(as.publicJwk))
      .update(`${hmacHeader}.${p}`)
      .digest("base64url")}`;
    const matrix: [string, string][] = [
      ["another audience", await as.tokenFor(REPORTER, OTHER_RESOURCE)],
      ["another issuer", await as.forge({ ...claims, iss: "http://127.0.0.1:1/elsewhere" })],
      ["expired", await as.forge({ ...claims, iat: now - 7200, exp: now - 3600 })],
      ["no exp", await as.forge({ ...claims, exp: undefined })],
      ["not an access token (typ JWT)", await as.forge(claims, { typ: "JWT" })],
      ["bad signature", `${h}.${p}.${Buffer.from("not-the-signature").toString("base64url")}`],
      ["tampered", `${h}.${encode({ ...claims, client_id: "someone-else" })}.${s}`],
      ["alg none", `${encode({ alg: "none", typ: "at+jwt" })}.${p}.`],
      ["HMAC signed with the public key", hmac],
      ["not a JWT", "opaque-token-value"],
    ];
    for (const [name, token] of matrix) {
      const res = await post(LIST, token);
      expect(res.status, name).toBe(401);
      expect(res.challenge, name).toContain('error="invalid_token"');
      expect(res.challenge, name).toContain("resource_metadata=");
    }
    // The same request with the good token passes: the refusals were the tokens'.
    expect((await post(LIST, good)).status).toBe(200);
  });
});

describe("KORRAL_AUTH=oauth: scopes", () => {
  const insufficient = (res: { status: number; challenge: string | null }, scopes: string) => {
    expect(res.status).toBe(403);
    expect(res.challenge).toContain('error="insufficient_scope"');
    expect(res.challenge).toContain(`scope="${scopes}"`);
    expect(res.challenge).toContain(
      `resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`,
    );
  };

  it("a read-only token is refused the write with 403 insufficient_scope, preview included", async () => {
    const token = await as.tokenFor(REPORTER, resource);
    insufficient(
      await post(toolCall(1, "create_replenishment_order", ORDER), token),
      `${READ_SCOPE} ${ORDER_SCOPE}`,
    );
    insufficient(
      await post(toolCall(2, "create_replenishment_order", { ...ORDER, dry_run: true }), token),
      `${READ_SCOPE} ${ORDER_SCOPE}`,
    );
  });

  it("…and in any element of a batch, before any element runs", async () => {
    const token = await as.tokenFor(REPORTER, resource);
    const batch = [
      toolCall(1, "lookup_sku", { query: "butter" }),
      toolCall(2, "create_replenishment_order", ORDER),
    ];
    const res = await post(batch, token);
    insufficient(res, `${READ_SCOPE} ${ORDER_SCOPE}`);
    expect(res.text).not.toContain("8847291");
  });

  it("each write refused for its scope is audited REJECTED with who, one line per write of the batch", async () => {
    const token = await as.tokenFor(REPORTER, resource);
    const before = await auditLines();
    const batch = [
      toolCall(1, "create_replenishment_order", { ...ORDER, store_id: "63", quantity: 7 }),
      toolCall(2, "lookup_sku", { query: "butter" }),
      toolCall(3, "create_replenishment_order", { ...ORDER, quantity: 9, dry_run: true }),
    ];
    insufficient(await post(batch, token), `${READ_SCOPE} ${ORDER_SCOPE}`);
    const lines = (await auditLines()).slice(before.length);
    expect(lines).toHaveLength(2);
    const who = ` by=client:${REPORTER.clientId} client=${REPORTER.clientId} `;
    const missing = `detail="the caller's token lacks the ${ORDER_SCOPE} scope`;
    expect(lines[0]).toMatch(/ REJECTED - store=63 sku=8847291 qty=7 req=req_\w+ by=/);
    expect(lines[1]).toMatch(/ REJECTED - store=47 sku=8847291 qty=9 req=req_\w+ by=/);
    for (const line of lines) {
      expect(line).toContain(who);
      expect(line).toContain(missing);
    }
    // Each its own call: two request ids.
    expect(new Set(lines.map((l) => /req=(\w+)/.exec(l)?.[1])).size).toBe(2);
  });

  it("a token with the order scope places the order", async () => {
    const token = await as.tokenFor(AGENT, resource);
    expect(claimsOf(token).scope).toBe(`${READ_SCOPE} ${ORDER_SCOPE}`);
    const res = await post(toolCall(1, "create_replenishment_order", ORDER), token);
    expect(res.status).toBe(200);
    const orderId = /RPL-47-\d{3}/.exec(res.text)?.[0];
    expect(orderId).toBeDefined();
    // The audit line names the verified principal and its client.
    const audit = await readFile(join(ws.logDir, "audit.log"), "utf8");
    const line = audit.split("\n").find((l) => l.includes(` CREATED ${orderId} `));
    expect(line).toContain(" by=client:replenishment-agent ");
    expect(line).toContain(" client=replenishment-agent");
  });

  it("a token without the read scope is refused every call (403, the read scope named)", async () => {
    const token = await as.tokenFor(AGENT, resource, ORDER_SCOPE);
    insufficient(await post(LIST, token), READ_SCOPE);
  });
});

describe("KORRAL_AUTH=oauth: the caller is the verified principal", () => {
  it("the rate limit counts per principal: a client's new token shares its budget, another client has its own", async () => {
    const limitedBase = `http://127.0.0.1:${limitedPort}`;
    const limited = spawnDist("http.js", {
      PORT: String(limitedPort),
      HOST: "127.0.0.1",
      KORRAL_KEYS_FILE: ws.keysFile,
      KORRAL_LOG_DIR: join(ws.dir, "limited-log"),
      KORRAL_AUTH: "oauth",
      KORRAL_OAUTH_ISSUER: as.issuer,
      KORRAL_OAUTH_RESOURCE: `${limitedBase}/mcp`,
      KORRAL_POLICY_FILE: policy,
      KORRAL_RATE_LIMIT_PER_MIN: "1",
    });
    try {
      await waitForHealthy(limited, `${limitedBase}/healthz`);
      /** One read; `as` the credential header (Cloud Run's preferred one, or the standard). */
      const read = async (token: string, extra: Record<string, string> = {}) => {
        const res = await fetch(`${limitedBase}/mcp`, {
          method: "POST",
          headers: { ...MCP_HEADERS, authorization: `Bearer ${token}`, ...extra },
          body: JSON.stringify(toolCall(1, "lookup_sku", { query: "butter" })),
        });
        expect(res.status).toBe(200);
        return (await res.text()).includes("rate_limited") ? "limited" : "served";
      };
      const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url");
      const agentToken = await as.tokenFor(AGENT, `${limitedBase}/mcp`);
      const agentAgain = await as.tokenFor(AGENT, `${limitedBase}/mcp`);
      expect(agentAgain).not.toBe(agentToken);
      const reporterToken = await as.tokenFor(REPORTER, `${limitedBase}/mcp`);
      expect(await read(agentToken)).toBe("served");
      expect(await read(agentToken)).toBe("limited");
      expect(await read(agentAgain)).toBe("limited");
      // The issue's attack: a verified token where Cloud Run looks (X-Serverless-Authorization)
      // and any claims in Authorization. The caller is the verified one, whatever Authorization
      // says (today's unverified caller would be a fresh identity here, and served).
      const claimed = `${encode({ alg: "none" })}.${encode({ sub: "fresh-identity" })}.`;
      expect(await read(claimed, { "x-serverless-authorization": `Bearer ${agentToken}` })).toBe(
        "limited",
      );
      expect(await read(reporterToken)).toBe("served");
    } finally {
      await limited.stop();
    }
  });
});

describe("KORRAL_AUTH=oauth: the token in no output", () => {
  it("no token this file sent is in stdout, stderr or any file of the log directory", async () => {
    expect(sent.size).toBeGreaterThan(5);
    const files = await readdir(ws.logDir).catch(() => [] as string[]);
    const texts = [server.stdout(), server.stderr()];
    for (const file of files) texts.push(await readFile(join(ws.logDir, file), "utf8"));
    expect(texts.join("")).toContain("refused"); // the debug lines about refusals are there
    for (const token of sent) {
      const signature = token.split(".")[2] ?? token;
      for (const text of texts) {
        expect(text.includes(token)).toBe(false);
        if (signature.length > 10) expect(text.includes(signature)).toBe(false);
      }
    }
  });
});
