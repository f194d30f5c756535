import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from "jose";

/**
 * Google's side of an ID token, on 127.0.0.1: an RS256 key made per run, its JWKS served where
 * KORRAL_TEST_GOOGLE_CERTS_URL points the server (the test-only seam; tests never reach Google),
 * and tokens shaped as Google signs them (`iss` https://accounts.google.com, `aud` the service's
 * URL, `email`, `email_verified`). Closed by the test.
 */
export interface FakeGoogle {
  certsUrl: string;
  /** A Google-shaped ID token for `email` and `audience`; `claims` override any field. */
  idToken(email: string, audience: string, claims?: JWTPayload): Promise<string>;
  close(): Promise<void>;
}

export async function startFakeGoogle(): Promise<FakeGoogle> {
  const { privateKey, publicKey } = await generateKeyPair("RS256");
  const kid = `google-test-${process.pid}`;
  const jwks = JSON.stringify({
    keys: [{ ...(await exportJWK(publicKey)), kid, alg: "RS256", use: "sig" }],
  });
  const server = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" }).end(jwks);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return {
    certsUrl: `http://127.0.0.1:${port}/oauth2/v3/certs`,
    idToken(email, audience, claims = {}) {
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({
        iss: "https://accounts.google.com",
        aud: audience,
        sub: "107234567890123456789",
        azp: "107234567890123456789",
        email,
        email_verified: true,
        iat: now,
        exp: now + 3600,
        ...claims,
      })
        .setProtectedHeader({ alg: "RS256", kid, typ: "JWT" })
        .sign(privateKey);
    },
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, "close");
    },
  };
}
