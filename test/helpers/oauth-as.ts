import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createInterface } from "node:readline";
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
import { tracked } from "./spawn.js";

/**
 * A real authorization server for the tests: test/fixtures/oauth-as.mjs (oidc-provider) as a
 * child process on 127.0.0.1, with an ES256 key made for this run. It exits when the test stops
 * it, when the test process goes (its stdin closes), and is killed by the set-up file after the
 * test file whatever happened (it is tracked like a spawned server); a start that fails kills it.
 *
 * The test keeps the signing key, to forge what the AS would never issue (an expired token, one
 * without `exp`, one of another issuer) with a signature the server's key set accepts.
 */

const FIXTURE = fileURLToPath(new URL("../fixtures/oauth-as.mjs", import.meta.url));
/** oidc-provider 9 is made for Node 22; the conformance suite's Node 22 runs it when installed. */
const NODE_22 = fileURLToPath(
  new URL("../../conformance/node_modules/node/bin/node", import.meta.url),
);

export const READ_SCOPE = "storelink.read";
export const ORDER_SCOPE = "storelink.order";

export interface ServiceClient {
  clientId: string;
  clientSecret: string;
  /** The scopes this client may ever get (its registered ceiling). */
  scope: string;
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
  const node = existsSync(NODE_22) ? NODE_22 : process.execPath;
  const child = tracked(
    spawn(node, [FIXTURE], {
      env: {
        PATH: process.env.PATH ?? "",
        AS_SIGNING_KEY: JSON.stringify(privateJwk),
        AS_RESOURCES: options.resources.join(","),
        AS_SERVICE_CLIENTS: JSON.stringify(options.clients ?? [AGENT, REPORTER]),
      },
      stdio: ["pipe", "pipe", "pipe"],
    }),
  );
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.stdin.end();
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(timer);
    }
  };
  let issuer: string;
  try {
    issuer = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("the AS did not start in 20 s")), 20_000);
      child.once("exit", (code) => reject(new Error(`the AS exited (${code}) before listening`)));
      createInterface({ input: child.stdout }).once("line", (line) => {
        clearTimeout(timer);
        resolve((JSON.parse(line) as { issuer: string }).issuer);
      });
    });
  } catch (error) {
    child.kill("SIGKILL");
    await exited;
    throw new Error(`${(error as Error).message}; its stderr: ${stderr}`);
  }

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
    stderr: () => stderr,
    stop,
  };
}

/** A token's claims (the test reads its own tokens; the server never decodes one unverified). */
export const claimsOf = (token: string): JWTPayload => decodeJwt(token);
