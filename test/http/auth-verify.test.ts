import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { AuthUnavailable, tokenVerifier } from "../../src/http/auth/verify.js";
import { type FakeGoogle, startFakeGoogle } from "../helpers/google-idp.js";
import { AGENT, type RunningAs, startAuthorizationServer } from "../helpers/oauth-as.js";

/**
 * Who a verified token names (the principal rule) and what it may do, with the configuration's
 * own settings: against a real authorization server's keys (oidc-provider, a child process, its
 * metadata discovered) and a local stand-in for Google's.
 */

const RESOURCE = "http://127.0.0.1:8080/mcp";
const EXTRA = "api://storelink";
let as: RunningAs;
let google: FakeGoogle;

beforeAll(async () => {
  as = await startAuthorizationServer({ resources: [RESOURCE] });
  google = await startFakeGoogle();
});
afterAll(async () => {
  await as?.stop();
  await google?.close();
});

const verifierWith = (env: Record<string, string> = {}) =>
  tokenVerifier(
    loadConfig(
      {
        KORRAL_AUTH: "oauth,google",
        KORRAL_OAUTH_ISSUER: as.issuer,
        KORRAL_OAUTH_RESOURCE: RESOURCE,
        KORRAL_OAUTH_AUDIENCES: EXTRA,
        KORRAL_GOOGLE_AUDIENCES: "https://svc-123.a.run.app",
        KORRAL_TEST_GOOGLE_CERTS_URL: google.certsUrl,
        // Named only: the verifier never reads it.
        KORRAL_POLICY_FILE: "/etc/korral/policy.json",
        ...env,
      },
      "http",
    ).auth,
  ).verify;

const now = () => Math.floor(Date.now() / 1000);
const access = (claims: Record<string, unknown>) =>
  as.forge({ aud: RESOURCE, iat: now(), exp: now() + 300, client_id: "buyer-desktop", ...claims });

describe("OAuth access tokens: the principal", () => {
  it("a client's own token (client credentials) names the client", async () => {
    const verified = await verifierWith()(await as.tokenFor(AGENT, RESOURCE));
    expect(verified).toMatchObject({
      kind: "oauth",
      principal: "client:replenishment-agent",
      clientId: "replenishment-agent",
      scopes: ["storelink.read", "storelink.order"],
    });
  });

  it("a person's token names the person by the e-mail claim; a service account's as svc:", async () => {
    const verify = verifierWith();
    expect(
      (await verify(await access({ sub: "alice", email: "alice@korral.example" }))).principal,
    ).toBe("user:alice@korral.example");
    expect(
      (await verify(await access({ sub: "sa", email: "bot@p.iam.gserviceaccount.com" }))).principal,
    ).toBe("svc:bot@p.iam.gserviceaccount.com");
  });

  it("the claim is configurable; a person's token without it is refused, never named by sub", async () => {
    const token = await access({ sub: "alice", upn: "Alice@Korral.example" });
    await expect(verifierWith()(token)).rejects.toThrow(/names no email/);
    expect((await verifierWith({ KORRAL_OAUTH_PRINCIPAL_CLAIM: "upn" })(token)).principal).toBe(
      "user:alice@korral.example",
    );
  });

  it("reads scopes from `scope` and `scp` (a list), and accepts a configured extra audience", async () => {
    const verified = await verifierWith()(
      await access({
        aud: EXTRA,
        sub: "buyer-desktop",
        scope: "storelink.read",
        scp: ["storelink.order"],
      }),
    );
    expect(verified.principal).toBe("client:buyer-desktop");
    expect(verified.scopes).toEqual(["storelink.read", "storelink.order"]);
  });

  it("IdP groups: the configured claim's names (a list or one), nothing else; none without the setting", async () => {
    const claim = "https://korral.example/groups";
    const verify = verifierWith({ KORRAL_OAUTH_GROUPS_CLAIM: claim });
    const groupsOf = async (value: unknown) =>
      (await verify(await access({ sub: "buyer-desktop", [claim]: value }))).groups;
    expect(await groupsOf(["korral-dairy-buyers", "Brno buyers", "korral-dairy-buyers"])).toEqual([
      "korral-dairy-buyers",
      "Brno buyers",
    ]);
    expect(await groupsOf("korral-dairy-buyers")).toEqual(["korral-dairy-buyers"]);
    expect(await groupsOf(["ok", 7, null, { name: "x" }, "", "g".repeat(129)])).toEqual(["ok"]);
    expect(await groupsOf({ korral: true })).toEqual([]);
    const unset = await verifierWith()(
      await access({ sub: "buyer-desktop", groups: ["korral-dairy-buyers"] }),
    );
    expect(unset.groups).toEqual([]);
  });

  it("an issuer whose metadata cannot be read: unavailable (503), not the token's fault", async () => {
    const verify = verifierWith({ KORRAL_OAUTH_ISSUER: "http://127.0.0.1:1" });
    const token = await as.forge({ iss: "http://127.0.0.1:1", aud: RESOURCE, exp: now() + 60 });
    await expect(verify(token)).rejects.toBeInstanceOf(AuthUnavailable);
  });
});

describe("Google ID tokens", () => {
  const AUD = "https://svc-123.a.run.app";

  it("a service account is svc:, a person user:, and both get the two scopes", async () => {
    const verify = verifierWith();
    const sa = await verify(await google.idToken("agent@korral-prod.iam.gserviceaccount.com", AUD));
    expect(sa).toMatchObject({
      kind: "google",
      principal: "svc:agent@korral-prod.iam.gserviceaccount.com",
      scopes: ["storelink.read", "storelink.order"],
    });
    expect((await verify(await google.idToken("bob@korral.example", AUD))).principal).toBe(
      "user:bob@korral.example",
    );
  });

  it("refuses an unverified e-mail, no e-mail, another audience, another issuer's iss", async () => {
    const verify = verifierWith();
    for (const token of [
      await google.idToken("bob@korral.example", AUD, { email_verified: false }),
      await google.idToken("bob@korral.example", AUD, { email: undefined }),
      await google.idToken("bob@korral.example", "https://other.a.run.app"),
      await google.idToken("bob@korral.example", AUD, { iss: "https://accounts.example.com" }),
    ]) {
      await expect(verify(token)).rejects.toThrow(/token/);
    }
  });

  it("with google alone, an OAuth token is checked as Google's and refused", async () => {
    const verify = verifierWith({ KORRAL_AUTH: "google" });
    await expect(verify(await as.tokenFor(AGENT, RESOURCE))).rejects.toThrow(/token rejected/);
  });
});
