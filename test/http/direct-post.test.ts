import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type RequestListener, type Server } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { deflateSync, gzipSync } from "node:zlib";
import fc from "fast-check";
import { decodeProtectedHeader, generateKeyPair, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Config, loadConfig } from "../../src/config.js";
import { composeDeps } from "../../src/deps.js";
import { createApp } from "../../src/http/app.js";
import { authGate } from "../../src/http/auth/gate.js";
import { JSON_BODY_LIMIT_BYTES, MAX_BODY_DEPTH } from "../../src/http/body-refusals.js";
import { directPost } from "../../src/http/direct-post.js";
import { LOOPBACK_HOSTS } from "../../src/http/host-patterns.js";
import { OrderCap } from "../../src/policy/order-cap.js";
import { policySourceFor } from "../../src/policy/policy-source.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { RUNS } from "../helpers/arbitraries.js";
import { MapKeyProvider, MemoryRecorder } from "../helpers/harness.js";
import {
  AGENT,
  ORDER_SCOPE,
  READ_SCOPE,
  type RunningAs,
  startAuthorizationServer,
} from "../helpers/oauth-as.js";
import { initialize, MCP_HEADERS, modernHeaders, modernMeta, toolCall } from "../helpers/rpc.js";

/**
 * The direct way in (http/direct-post.ts) against its reference, the same app with every request
 * through Express: the same raw bytes sent to both, over a socket, and the same answer back
 * (status line, headers less `Date`, body byte for byte, timestamps in bodies aside), the same
 * trace lines. Named cases cover what it takes and everything it must hand to Express; generated
 * ones vary headers and bodies.
 */

interface Way {
  server: Server;
  port: number;
  recorder: MemoryRecorder;
}

/**
 * A server of the app, direct way on or off; short timeouts so a stalled body ends fast. With
 * `config`, its KORRAL_AUTH gate and store policy.
 */
async function start(direct: boolean, config?: Config): Promise<Way> {
  const recorder = new MemoryRecorder();
  const policy = config ? policySourceFor(config) : undefined;
  const app = createApp(
    composeDeps({
      storelink: new InMemoryStoreLink(),
      keys: new MapKeyProvider(),
      recorder,
      orderCap: new OrderCap({ perHour: 0 }),
      ...(policy ? { policy } : {}),
    }),
    {
      directPost: direct,
      allowedHosts: LOOPBACK_HOSTS,
      ...(config ? { auth: authGate(config.auth, recorder) } : {}),
    },
  );
  const server = createServer(
    { requestTimeout: 1500, connectionsCheckingInterval: 100 },
    app as RequestListener,
  );
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return { server, port: (server.address() as AddressInfo).port, recorder };
}

const stop = async (way: Way | undefined) => {
  way?.server.closeAllConnections();
  await new Promise((resolve) => way?.server.close(resolve));
};

let direct: Way;
let express: Way;
beforeAll(async () => {
  direct = await start(true);
  express = await start(false);
});
afterAll(async () => {
  await stop(direct);
  await stop(express);
});

interface Send {
  /** Bytes in pieces: each written after `pauseMs` (a trickling or cut body). */
  pieces: Buffer[];
  pauseMs?: number;
  /** Close the socket after the pieces, without waiting for an answer. */
  abort?: boolean;
}

/** Sends `send` to `port` and reads the whole answer (the server closes: `Connection: close`). */
function exchange(port: number, send: Send): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    const received: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => received.push(chunk));
    socket.on("error", reject);
    socket.on("close", () => resolve(Buffer.concat(received).toString("latin1")));
    socket.once("connect", async () => {
      for (const piece of send.pieces) {
        socket.write(piece);
        if (send.pauseMs) await new Promise((r) => setTimeout(r, send.pauseMs));
      }
      if (send.abort) socket.destroy();
    });
  });
}

/** The answer as compared: no Date header, timestamps in the body masked. */
const comparable = (raw: string): string =>
  raw
    .replace(/^date: .*\r\n/gim, "")
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,3})?Z/g, "<time>");

/** A raw request: headers in order, "" leaves one out; Content-Length from the body. */
function raw(
  body: string | Buffer,
  headers: Record<string, string> = {},
  { method = "POST", path = "/mcp" } = {},
): Send {
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body);
  const all: Record<string, string> = {
    host: "127.0.0.1",
    ...MCP_HEADERS,
    "content-length": String(bytes.length),
    connection: "close",
    ...headers,
  };
  const head = Object.entries(all)
    .filter(([, v]) => v !== "")
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join("");
  return { pieces: [Buffer.from(`${method} ${path} HTTP/1.1\r\n${head}\r\n`), bytes] };
}

/** A chunked body: the same bytes in two chunks, no Content-Length. */
function chunked(body: string): Send {
  const half = Math.floor(body.length / 2);
  const parts = [body.slice(0, half), body.slice(half)];
  const encoded = `${parts.map((p) => `${Buffer.byteLength(p).toString(16)}\r\n${p}\r\n`).join("")}0\r\n\r\n`;
  const head = raw("", { "content-length": "", "transfer-encoding": "chunked" })
    .pieces[0] as Buffer;
  return { pieces: [head, Buffer.from(encoded)] };
}

async function answersAlike(send: Send, ways = { direct, express }): Promise<string> {
  const { direct, express } = ways;
  const tracesBefore = [direct.recorder.traces.length, express.recorder.traces.length];
  const [a, b] = await Promise.all([exchange(direct.port, send), exchange(express.port, send)]);
  expect(comparable(a)).toBe(comparable(b));
  const traced = (way: Way, from: number) =>
    way.recorder.traces.slice(from).map((t) => [t.tool, t.status, t.error, t.store_id]);
  expect(traced(direct, tracesBefore[0] as number)).toEqual(
    traced(express, tracesBefore[1] as number),
  );
  return a;
}

const READ = toolCall(7, "get_stock_position", { sku: "8847291", store_ids: ["47", "102", "111"] });
const READ_TEXT = JSON.stringify(READ);
const MODERN_READ = {
  ...READ,
  params: { ...READ.params, _meta: modernMeta() },
};
const WRITE = toolCall(9, "create_replenishment_order", {
  store_id: "47",
  sku: "8847291",
  quantity: 24,
  reason: "Gap of 8 units at store 47 over 24h; the buyer approved 24.",
  idempotency_key: "direct-post-test-0001",
});
const deep = (levels: number): unknown => {
  let value: unknown = "x";
  for (let i = 0; i < levels; i++) value = [value];
  return value;
};

const NAMED: [string, Send][] = [
  ["a 2025 read", raw(READ_TEXT)],
  [
    "a 2026-07-28 read",
    raw(JSON.stringify(MODERN_READ), modernHeaders("tools/call", "get_stock_position")),
  ],
  [
    "a 2025 read with _meta.traceparent",
    raw(
      JSON.stringify({
        ...READ,
        params: {
          ...READ.params,
          _meta: { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" },
        },
      }),
    ),
  ],
  ["a lookup", raw(JSON.stringify(toolCall(3, "lookup_sku", { query: "butter" })))],
  ["a write", raw(JSON.stringify(WRITE))],
  ["initialize", raw(JSON.stringify(initialize()))],
  ["a batch of two reads", raw(JSON.stringify([READ, { ...READ, id: 8 }]))],
  ["a batch repeating an id", raw(JSON.stringify([READ, READ]))],
  ["an empty batch", raw("[]")],
  ["a notification", raw(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }))],
  ["JSON whitespace first", raw(`\r\n\t ${READ_TEXT}`)],
  [
    "a charset in Content-Type",
    raw(READ_TEXT, { "content-type": "application/json; charset=UTF-8" }),
  ],
  ["a Latin-1 charset", raw(READ_TEXT, { "content-type": "application/json; charset=latin1" })],
  ["a UTF-16 charset", raw(READ_TEXT, { "content-type": "application/json; charset=utf-16" })],
  ["text/plain", raw(READ_TEXT, { "content-type": "text/plain" })],
  ["no Content-Type", raw(READ_TEXT, { "content-type": "" })],
  ["a gzip body", raw(gzipSync(READ_TEXT), { "content-encoding": "gzip" })],
  ["a deflate body", raw(deflateSync(READ_TEXT), { "content-encoding": "deflate" })],
  ["identity encoding", raw(READ_TEXT, { "content-encoding": "identity" })],
  ["an unknown encoding", raw(READ_TEXT, { "content-encoding": "br2" })],
  ["a chunked body", chunked(READ_TEXT)],
  [
    "a body over the limit",
    raw(JSON.stringify({ ...READ, pad: "x".repeat(JSON_BODY_LIMIT_BYTES) })),
  ],
  ["a body of exactly the limit", raw(`{"pad":"${"x".repeat(JSON_BODY_LIMIT_BYTES - 10)}"}`)],
  ["an empty body", raw("")],
  ["a BOM", raw(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(READ_TEXT)]))],
  ["not JSON", raw("{jsonrpc: 2.0}")],
  ["a JSON string", raw('"tools/call"')],
  ["a JSON number", raw("42")],
  ["null", raw("null")],
  [
    "invalid UTF-8",
    raw(
      Buffer.concat([
        Buffer.from('{"jsonrpc":"2.0","id":1,"method":"'),
        Buffer.from([0xc3, 0x28]),
        Buffer.from('"}'),
      ]),
    ),
  ],
  [
    "nested too deep",
    raw(
      JSON.stringify({
        ...READ,
        params: { ...READ.params, arguments: { x: deep(MAX_BODY_DEPTH + 2) } },
      }),
    ),
  ],
  ["a refused Host", raw(READ_TEXT, { host: "evil.example" })],
  ["no Host", raw(READ_TEXT, { host: "" })],
  ["a refused Origin", raw(READ_TEXT, { origin: "https://evil.example" })],
  ["a localhost Origin", raw(READ_TEXT, { origin: "http://localhost:5173" })],
  ["GET /mcp", raw("", { "content-length": "" }, { method: "GET" })],
  ["HEAD /mcp", raw("", { "content-length": "" }, { method: "HEAD" })],
  ["DELETE /mcp", raw("", { "content-length": "" }, { method: "DELETE" })],
  ["OPTIONS /mcp", raw("", { "content-length": "" }, { method: "OPTIONS" })],
  ["a query string", raw(READ_TEXT, {}, { path: "/mcp?x=1" })],
  ["a trailing slash", raw(READ_TEXT, {}, { path: "/mcp/" })],
  ["another case of the path", raw(READ_TEXT, {}, { path: "/MCP" })],
  ["another path", raw(READ_TEXT, {}, { path: "/other" })],
  ["Expect: 100-continue", raw(READ_TEXT, { expect: "100-continue" })],
  ["GET /healthz", raw("", { "content-length": "" }, { method: "GET", path: "/healthz" })],
];

describe("the direct way in answers as Express does", () => {
  it.each(NAMED)("%s", async (_name, send) => {
    await answersAlike(send);
  });

  it("takes the plain reads itself and hands the rest over, so the comparison is not empty", async () => {
    // The same read, once with a Content-Type only Express takes: both answered alike above, and
    // the read is answered with the tool's result.
    const answer = await answersAlike(raw(READ_TEXT));
    expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(answer).toContain('"on_hand"');
  });

  it("a body that trickles in slower than the request timeout: the same refusal", async () => {
    const { pieces } = raw(READ_TEXT);
    const body = pieces[1] as Buffer;
    const answer = await answersAlike({
      pieces: [pieces[0] as Buffer, body.subarray(0, 10), body.subarray(10, 20)],
      pauseMs: 1200,
    });
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
  });

  it("a client that goes mid-body: no answer, no trace line, and the next request is served", async () => {
    const { pieces } = raw(READ_TEXT);
    const cut: Send = {
      pieces: [pieces[0] as Buffer, (pieces[1] as Buffer).subarray(0, 20)],
      pauseMs: 50,
      abort: true,
    };
    await answersAlike(cut);
    expect(comparable(await exchange(direct.port, raw(READ_TEXT)))).toContain('"on_hand"');
  });

  it("generated headers and bodies", async () => {
    const contentType = fc.constantFrom(
      "application/json",
      "application/json; charset=utf-8",
      "Application/JSON",
      "application/json;charset=utf-8",
      "application/json; charset=ascii",
      "application/jsonx",
      "",
    );
    const accept = fc.constantFrom(
      MCP_HEADERS.accept,
      "application/json",
      "text/event-stream",
      "*/*",
      "",
    );
    const version = fc.constantFrom("", "2025-06-18", "2025-03-26", "2026-07-28", "1999-01-01");
    const message = fc.oneof(
      fc.constant(READ),
      fc.constant(MODERN_READ),
      fc.record({
        jsonrpc: fc.constantFrom("2.0", "1.0"),
        id: fc.oneof(fc.integer(), fc.string({ maxLength: 4 }), fc.constant(null)),
        method: fc.constantFrom("tools/call", "tools/list", "ping", "initialize"),
        params: fc.oneof(
          fc.constant(READ.params),
          fc.record({ name: fc.constantFrom("lookup_sku", "nope"), arguments: fc.object() }),
        ),
      }),
    );
    const body = fc.oneof(
      message.map((m) => JSON.stringify(m)),
      fc.array(message, { maxLength: 3 }).map((m) => JSON.stringify(m)),
      fc.string({ maxLength: 30 }),
    );
    await fc.assert(
      fc.asyncProperty(contentType, accept, version, body, async (type, acc, v, text) => {
        await answersAlike(
          raw(text, { "content-type": type, accept: acc, "mcp-protocol-version": v }),
        );
      }),
      { ...RUNS, numRuns: 40 },
    );
  });
});

describe("which way a request takes", () => {
  /** directPost over an app that echoes what it got and an answer that says it took it. */
  async function router(auth?: {
    accepts: () => Promise<boolean>;
    mayWrite: (req: unknown, body: unknown) => boolean;
  }) {
    const server = createServer(
      directPost({
        app: (req, res) => {
          const chunks: Buffer[] = [];
          req.on("data", (c: Buffer) => chunks.push(c));
          req.on("end", () => {
            const body = Buffer.concat(chunks);
            res.writeHead(299, { "content-length": body.length }).end(body);
          });
        },
        hostAllowed: (host) => host === "127.0.0.1",
        originAllowed: (origin) => origin === undefined,
        ...(auth ? { auth: { accepts: auth.accepts, mayWrite: auth.mayWrite } } : {}),
        answer: (_req, res, body) => {
          if ((body as { throw?: unknown }).throw === true) throw new Error("a bug in the handler");
          res.writeHead(200).end(JSON.stringify(body));
        },
        failed: (res) => res.writeHead(598).end(),
      }),
    );
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    return {
      port: (server.address() as AddressInfo).port,
      close: () => new Promise((resolve) => server.close(resolve)),
    };
  }

  const TAKEN = new Set([
    "a 2025 read",
    "a 2026-07-28 read",
    "a 2025 read with _meta.traceparent",
    "a lookup",
    "a write",
    "initialize",
    "a batch of two reads",
    "a batch repeating an id",
    "an empty batch",
    "a notification",
    "JSON whitespace first",
    "a charset in Content-Type",
    "nested too deep",
    "a body of exactly the limit",
    "a localhost Origin",
  ]);

  it("takes what it can answer whole; hands the rest to the app with the very bytes sent", async () => {
    const { port, close } = await router();
    // The router's stand-ins accept only a missing Origin: that case goes to the app here.
    const taken = new Set([...TAKEN].filter((name) => name !== "a localhost Origin"));
    try {
      for (const [name, send] of NAMED) {
        if (send.pieces[0]?.toString().includes("expect: 100-continue")) continue;
        const answer = await exchange(port, send);
        const status = answer.slice(9, 12);
        // Node itself refuses an HTTP/1.1 request without Host, before any listener.
        const expected = name === "no Host" ? "400" : taken.has(name) ? "200" : "299";
        expect([name, status]).toEqual([name, expected]);
        if (status === "299" && send.pieces[0]?.toString().startsWith("POST")) {
          // Content-Length framed bodies come back as sent (chunked and encoded ones too).
          const sent = send.pieces.slice(1);
          const body = answer.slice(answer.indexOf("\r\n\r\n") + 4);
          if (!send.pieces[0].toString().includes("chunked")) {
            expect([name, body]).toEqual([name, Buffer.concat(sent).toString("latin1")]);
          }
        }
      }
    } finally {
      await close();
    }
  });

  it("a throw out of the handler is answered, never left to crash the process", async () => {
    const { port, close } = await router();
    try {
      expect((await exchange(port, raw('{"throw":true}'))).slice(9, 12)).toBe("598");
      expect((await exchange(port, raw(READ_TEXT))).slice(9, 12)).toBe("200");
    } finally {
      await close();
    }
  });

  it("with a token check: a refused token, and a write its scopes refuse, go to the app", async () => {
    let accept = true;
    let write = true;
    const { port, close } = await router({
      accepts: async () => accept,
      mayWrite: () => write,
    });
    try {
      const status = async (send: Send) => (await exchange(port, send)).slice(9, 12);
      expect(await status(raw(READ_TEXT))).toBe("200");
      expect(await status(raw(JSON.stringify(WRITE)))).toBe("200");
      write = false;
      expect(await status(raw(JSON.stringify(WRITE)))).toBe("299");
      accept = false;
      expect(await status(raw(READ_TEXT))).toBe("299");
    } finally {
      await close();
    }
  });
});

describe("with OAuth on, the direct way answers as Express does", () => {
  const RESOURCE = "http://127.0.0.1:8080/mcp";
  let as: RunningAs;
  let ways: { direct: Way; express: Way };
  let dir: string;
  beforeAll(async () => {
    as = await startAuthorizationServer({ resources: [RESOURCE] });
    dir = await mkdtemp(join(tmpdir(), "korral-direct-"));
    const policy = join(dir, "policy.json");
    await writeFile(
      policy,
      JSON.stringify({
        version: 1,
        mode: "enforce",
        groups: { brno: { read: { stores: ["47", "102"] }, order: { stores: ["47"] } } },
        principals: { [`client:${AGENT.clientId}`]: ["brno"], "client:buyer-desktop": ["brno"] },
      }),
    );
    const config = loadConfig(
      {
        KORRAL_AUTH: "oauth",
        KORRAL_OAUTH_ISSUER: as.issuer,
        KORRAL_OAUTH_RESOURCE: RESOURCE,
        KORRAL_POLICY_FILE: policy,
      },
      "http",
    );
    ways = { direct: await start(true, config), express: await start(false, config) };
  }, 60_000);
  afterAll(async () => {
    await stop(ways?.direct);
    await stop(ways?.express);
    await as?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const now = () => Math.floor(Date.now() / 1000);
  const token = (claims: Record<string, unknown> = {}) =>
    as.forge({
      aud: RESOURCE,
      iat: now(),
      exp: now() + 300,
      client_id: "buyer-desktop",
      scope: `${READ_SCOPE} ${ORDER_SCOPE}`,
      ...claims,
    });
  const bearer = async (claims?: Record<string, unknown>) => ({
    authorization: `Bearer ${await token(claims)}`,
  });

  it("a verified read, and one for a store outside the caller's policy", async () => {
    const read = await answersAlike(raw(READ_TEXT, await bearer()), ways);
    expect(read).toContain('"on_hand"');
    expect(read).toContain("not_permitted");
  });

  it("a write by a caller with both scopes", async () => {
    const written = await answersAlike(raw(JSON.stringify(WRITE), await bearer()), ways);
    expect(written).toMatch(/^HTTP\/1\.1 200 /);
  });

  /** A token like the AS's in every field, signed with another key under the AS's key id. */
  const signedElsewhere = async () => {
    const { kid } = decodeProtectedHeader(await token());
    const { privateKey } = await generateKeyPair("ES256");
    const jwt = new SignJWT({
      iss: as.issuer,
      aud: RESOURCE,
      iat: now(),
      exp: now() + 300,
      client_id: "buyer-desktop",
      scope: `${READ_SCOPE} ${ORDER_SCOPE}`,
    }).setProtectedHeader({ alg: "ES256", typ: "at+jwt", ...(kid ? { kid } : {}) });
    return { authorization: `Bearer ${await jwt.sign(privateKey)}` };
  };

  it("no token, a garbage one, an expired one, a foreign audience, another key's: the same 401", async () => {
    const refused = [
      {},
      { authorization: "Bearer not-a-token" },
      await bearer({ exp: now() - 60 }),
      await bearer({ aud: "https://someone-else.example/mcp" }),
      await signedElsewhere(),
    ];
    for (const headers of refused) {
      expect(await answersAlike(raw(READ_TEXT, headers), ways)).toMatch(/^HTTP\/1\.1 401 /);
    }
  });

  it("a read-only token: its read is served, its write refused 403 and audited alike", async () => {
    const readOnly = await bearer({ scope: READ_SCOPE });
    expect(await answersAlike(raw(READ_TEXT, readOnly), ways)).toMatch(/^HTTP\/1\.1 200 /);
    const audits = [ways.direct.recorder.audits.length, ways.express.recorder.audits.length];
    const refused = await answersAlike(raw(JSON.stringify(WRITE), readOnly), ways);
    expect(refused).toMatch(/^HTTP\/1\.1 403 /);
    const outcomes = (way: Way, from: number) =>
      way.recorder.audits.slice(from).map((a) => [a.outcome, a.by]);
    expect(outcomes(ways.direct, audits[0] as number)).toEqual(
      outcomes(ways.express, audits[1] as number),
    );
    expect(outcomes(ways.direct, audits[0] as number)).toHaveLength(1);
  });
});
