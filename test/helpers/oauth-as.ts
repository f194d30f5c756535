import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import {
  type CryptoKey,
  decodeJwt,
  exportJWK,
  generateKeyPair,
  type JWK,
  type JWTPayload,
  SignJWT,
} from "jose";
import { NODE_22 } from "./compile-cache.js";
import { spawnProcess } from "./spawn.js";

/**
 * A real authorization server for the tests: test/fixtures/oauth-as.mjs (oidc-provider) as a
 * child process on 127.0.0.1, with an ES256 key made for this run, started through the one spawn
 * helper (test/helpers/spawn.ts): it exits when the test stops it or its stdin closes, a start
 * that fails kills it, and whatever happens it never outlives its test (or its file, when a
 * `beforeAll` started it).
 *
 * The test keeps the signing key, to forge what the AS would never issue (an expired token, one
 * without `exp`, one of another issuer) with a signature the server's key set accepts.
 */

const FIXTURE = fileURLToPath(new URL("../fixtures/oauth-as.mjs", import.meta.url));

export const READ_SCOPE = "storelink.read";
export const ORDER_SCOPE = "storelink.order";

export interface ServiceClient {
  clientId: string;
  clientSecret: string;
  /** The scopes this client may ever get (its registered ceiling). */
  scope: string;
  /** The IdP groups its tokens list, in their `groups` claim. */
  groups?: string[];
}

/** An agent that may read and order, and a report job that may only read. */
export const AGENT: ServiceClient = {
  clientId: "replenishment-agent",
  clientSecret: "agent-secret-for-tests-only",
  scope: `${READ_SCOPE} ${ORDER_SCOPE}`,
};
export const REPORTER: ServiceClient = {
  clientId: "stock-report-job",
  clientSecret: "reporter-secret-for-tests-only",
  scope: READ_SCOPE,
};

export interface RunningAs {
  issuer: string;
  /** The AS's signing key (private), to forge tokens it would never issue. */
  signingKey: CryptoKey;
  /** Its public half, as the AS publishes it. */
  publicJwk: JWK;
  /** A client_credentials token of `client` for `resource` (scope: what is asked, or its ceiling). */
  tokenFor(client: ServiceClient, resource: string | undefined, scope?: string): Promise<string>;
  /** A JWT signed with the AS's key, header and claims as given (defaults: an at+jwt of this AS). */
  forge(claims: JWTPayload, header?: { typ?: string }): Promise<string>;
  stderr(): string;
  stop(): Promise<void>;
}

export async function startAuthorizationServer(options: {
  resources: string[];
  clients?: ServiceClient[];
}): Promise<RunningAs> {
  const { privateKey, publicKey } = await generateKeyPair("ES256", { extractable: true });
  const kid = `test-${process.pid}-${Date.now()}`;
  const privateJwk = { ...(await exportJWK(privateKey)), kid };
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: "ES256", use: "sig" };
  // oidc-provider 9 is made for Node 22: the conformance suite's Node 22 runs it when installed.
  const node = existsSync(NODE_22) ? NODE_22 : process.execPath;
  const run = spawnProcess(node, [FIXTURE], {
    env: {
      PATH: process.env.PATH ?? "",
      AS_SIGNING_KEY: JSON.stringify(privateJwk),
      AS_RESOURCES: options.resources.join(","),
      AS_SERVICE_CLIENTS: JSON.stringify(options.clients ?? [AGENT, REPORTER]),
    },
  });
  const issuer = (await run.ready(/^\{"issuer":"([^"]+)"\}$/m, 30_000))[1] as string;
  /** The end of its stdin stops it; SIGKILL if it has not gone after 5 s. */
  const stop = async () => {
    run.child.stdin?.end();
    const timer = setTimeout(() => void run.kill(), 5_000);
    await run.exit;
    clearTimeout(timer);
  };

  const tokenFor = async (client: ServiceClient, resource: string | undefined, scope?: string) => {
    const basic = Buffer.from(`${client.clientId}:${client.clientSecret}`).toString("base64");
    const res = await fetch(`${issuer}/token`, {
      method: "POST",
      headers: {
        authorization: `Basic ${basic}`,
        "content-type": "application/x-www-form-urlencoded",
      },
      body: new URLSearchParams({
        grant_type: "client_credentials",
        scope: scope ?? client.scope,
        ...(resource ? { resource } : {}),
      }),
    });
    const body = (await res.json()) as { access_token?: string };
    if (!res.ok || !body.access_token) throw new Error(`token endpoint: ${res.status}`);
    return body.access_token;
  };

  const forge = (claims: JWTPayload, header: { typ?: string } = {}) => {
    const jwt = new SignJWT({ iss: issuer, ...claims }).setProtectedHeader({
      alg: "ES256",
      kid,
      typ: header.typ ?? "at+jwt",
    });
    return jwt.sign(privateKey);
  };

  return {
    issuer,
    signingKey: privateKey,
    publicJwk,
    tokenFor,
    forge,
    stderr: run.stderr,
    stop,
  };
}

/** A token's claims (the test reads its own tokens; the server never decodes one unverified). */
export const claimsOf = (token: string): JWTPayload => decodeJwt(token);
