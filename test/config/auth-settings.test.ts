import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.js";
import { runToExit } from "../helpers/spawn.js";

/**
 * KORRAL_AUTH and its variables: unset is `none` on a loopback HOST only (both README commands
 * work on a fresh clone), any other listener must choose, `none` is refused in production, and
 * every mode says what it still needs, a store policy above all. Each refusal is one line, exit 2,
 * naming the variable.
 */

/** What production HTTP needs besides authentication, so only the auth problems remain. */
const PRODUCTION = {
  NODE_ENV: "production",
  KORRAL_STORELINK: "embedded",
  KORRAL_REQUEST_STATE_KEY: "a-test-request-state-key-of-32-bytes!!",
  KORRAL_LIMITS: "per-instance",
};
/** A store policy's source: the configuration names it, the file is read later. */
const POLICY = { KORRAL_POLICY_FILE: "/etc/korral/policy.json" };
const OAUTH = {
  KORRAL_AUTH: "oauth",
  KORRAL_OAUTH_ISSUER: "https://idp.korral.example",
  KORRAL_OAUTH_RESOURCE: "https://storelink-mcp.korral.example/mcp",
  ...POLICY,
};
const GOOGLE = { KORRAL_GOOGLE_AUDIENCES: "https://svc-123.run.app", ...POLICY };

function httpProblem(env: NodeJS.ProcessEnv): string {
  try {
    loadConfig(env, "http");
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).message;
  }
  throw new Error(`expected a ConfigError for ${JSON.stringify(env)}`);
}

describe("KORRAL_AUTH: which listeners may go without", () => {
  it("unset on a loopback HOST is none (the README's commands need nothing)", () => {
    for (const HOST of ["127.0.0.1", "localhost", "::1"]) {
      expect(loadConfig({ HOST }, "http").auth.kinds).toEqual([]);
    }
  });

  it("unset on any other HOST refuses to start, naming KORRAL_AUTH", () => {
    expect(httpProblem({ HOST: "0.0.0.0" })).toMatch(
      /KORRAL_AUTH: required when HOST is not loopback \(HOST=0\.0\.0\.0\)/,
    );
  });

  it("none on another HOST is the operator's explicit choice (today's unverified caller)", () => {
    expect(loadConfig({ HOST: "0.0.0.0", KORRAL_AUTH: "none" }, "http").auth.kinds).toEqual([]);
  });

  it("production refuses none, whether set or implied by a loopback HOST", () => {
    expect(httpProblem({ ...PRODUCTION, KORRAL_AUTH: "none" })).toMatch(
      /KORRAL_AUTH: none is refused when NODE_ENV=production/,
    );
    expect(httpProblem({ ...PRODUCTION })).toMatch(
      /KORRAL_AUTH: required on HTTP when NODE_ENV=production/,
    );
    expect(loadConfig({ ...PRODUCTION, ...OAUTH }, "http").auth.kinds).toEqual(["oauth"]);
  });

  it("stdio keeps no OAuth: none of this applies there", () => {
    expect(loadConfig({ HOST: "0.0.0.0", ...PRODUCTION }, "stdio").auth.kinds).toEqual([]);
  });
});

describe("KORRAL_AUTH: the modes and what each needs", () => {
  it("reads every mode, in any order", () => {
    expect(loadConfig({ ...OAUTH }, "http").auth.kinds).toEqual(["oauth"]);
    expect(loadConfig({ KORRAL_AUTH: "google", ...GOOGLE }, "http").auth.kinds).toEqual(["google"]);
    for (const both of ["oauth,google", "google, oauth"]) {
      expect(loadConfig({ ...OAUTH, ...GOOGLE, KORRAL_AUTH: both }, "http").auth.kinds).toEqual([
        "google",
        "oauth",
      ]);
    }
  });

  it("every verified mode needs a store policy, from a file or a secret", () => {
    const noPolicy =
      /KORRAL_POLICY_FILE or KORRAL_POLICY_SECRET: required when KORRAL_AUTH is not none/;
    const { KORRAL_POLICY_FILE: _file, ...oauthAlone } = OAUTH;
    const { KORRAL_POLICY_FILE: _too, ...googleAlone } = GOOGLE;
    expect(httpProblem(oauthAlone)).toMatch(noPolicy);
    expect(httpProblem({ KORRAL_AUTH: "google", ...googleAlone })).toMatch(noPolicy);
    expect(httpProblem({ ...PRODUCTION, ...oauthAlone })).toMatch(noPolicy);
    const secret = "projects/korral-prod/secrets/storelink-policy/versions/latest";
    expect(
      loadConfig({ ...oauthAlone, KORRAL_POLICY_SECRET: secret }, "http").policy.source,
    ).toEqual({ kind: "secret", name: secret });
    // none keeps today's open service; stdio keeps no OAuth.
    expect(
      loadConfig({ HOST: "0.0.0.0", KORRAL_AUTH: "none" }, "http").policy.source,
    ).toBeUndefined();
    expect(loadConfig({ ...oauthAlone }, "stdio").policy.source).toBeUndefined();
    // A bad secret name is said once, as itself.
    const bad = httpProblem({ ...oauthAlone, KORRAL_POLICY_SECRET: "a/b" });
    expect(bad).toMatch(/KORRAL_POLICY_SECRET: must be a secret id/);
    expect(bad).not.toMatch(noPolicy);
  });

  it("the IdP groups claim: unset reads none; a claim name, namespaced ones too", () => {
    expect(loadConfig({ ...OAUTH }, "http").auth.groupsClaim).toBeUndefined();
    for (const claim of ["groups", "https://korral.example/groups", "cognito:groups"]) {
      expect(
        loadConfig({ ...OAUTH, KORRAL_OAUTH_GROUPS_CLAIM: claim }, "http").auth.groupsClaim,
      ).toBe(claim);
    }
    expect(httpProblem({ ...OAUTH, KORRAL_OAUTH_GROUPS_CLAIM: "my groups" })).toMatch(
      /KORRAL_OAUTH_GROUPS_CLAIM: must be a claim name/,
    );
  });

  it("defaults: the scope names, the principal claim, Google's own keys", () => {
    const { auth } = loadConfig({ ...OAUTH }, "http");
    expect(auth).toMatchObject({
      readScope: "storelink.read",
      orderScope: "storelink.order",
      principalClaim: "email",
      audiences: [],
      googleCertsUrl: "https://www.googleapis.com/oauth2/v3/certs",
    });
  });

  it.each([
    [{ KORRAL_AUTH: "ldap" }, /KORRAL_AUTH: must be "oauth", "google", "oauth,google" or "none"/],
    [{ KORRAL_AUTH: "none,oauth" }, /KORRAL_AUTH: must be/],
    [{ KORRAL_AUTH: "oauth" }, /KORRAL_OAUTH_ISSUER: required when KORRAL_AUTH includes oauth/],
    [{ KORRAL_AUTH: "oauth" }, /KORRAL_OAUTH_RESOURCE: required when KORRAL_AUTH includes oauth/],
    [
      { KORRAL_AUTH: "google" },
      /KORRAL_GOOGLE_AUDIENCES: required when KORRAL_AUTH includes google/,
    ],
    [
      { ...OAUTH, KORRAL_OAUTH_ISSUER: "http://idp.korral.example" },
      /KORRAL_OAUTH_ISSUER: must be an https:\/\/ URL/,
    ],
    [
      { ...OAUTH, KORRAL_OAUTH_ISSUER: "https://idp.example/?tenant=1" },
      /KORRAL_OAUTH_ISSUER: must have no \?query/,
    ],
    [
      { ...OAUTH, KORRAL_OAUTH_RESOURCE: "https://mcp.example/mcp#x" },
      /KORRAL_OAUTH_RESOURCE: must have no #fragment/,
    ],
    [
      { ...OAUTH, KORRAL_OAUTH_ORDER_SCOPE: "storelink.read" },
      /KORRAL_OAUTH_ORDER_SCOPE: must differ/,
    ],
    [
      { ...OAUTH, KORRAL_OAUTH_READ_SCOPE: "two words" },
      /KORRAL_OAUTH_READ_SCOPE: must be one OAuth scope/,
    ],
    [
      { ...OAUTH, KORRAL_OAUTH_PRINCIPAL_CLAIM: "e mail" },
      /KORRAL_OAUTH_PRINCIPAL_CLAIM: must be a claim name/,
    ],
    [
      {
        KORRAL_AUTH: "google",
        ...GOOGLE,
        KORRAL_TEST_GOOGLE_CERTS_URL: "https://keys.example/certs",
      },
      /KORRAL_TEST_GOOGLE_CERTS_URL: tests only: must be an http\(s\) URL on loopback/,
    ],
  ])("%j is refused: %s", (env, message) => {
    expect(httpProblem(env)).toMatch(message);
  });

  it("an issuer or a resource on loopback may be plain http (tests, local runs)", () => {
    const { auth } = loadConfig(
      {
        KORRAL_AUTH: "oauth",
        KORRAL_OAUTH_ISSUER: "http://127.0.0.1:9000",
        KORRAL_OAUTH_RESOURCE: "http://localhost:8080/mcp",
        ...POLICY,
      },
      "http",
    );
    expect(auth.issuer).toBe("http://127.0.0.1:9000");
  });
});

describe("the built dist/http.js refuses to start: exit 2, one line naming the variable", () => {
  it.each([
    [
      "a non-loopback HOST without KORRAL_AUTH",
      { HOST: "0.0.0.0" },
      /KORRAL_AUTH: required when HOST is not loopback/,
    ],
    [
      "none in production",
      { ...PRODUCTION, KORRAL_AUTH: "none" },
      /KORRAL_AUTH: none is refused when NODE_ENV=production/,
    ],
    [
      "unset in production",
      { ...PRODUCTION },
      /KORRAL_AUTH: required on HTTP when NODE_ENV=production/,
    ],
    ["an unknown mode", { KORRAL_AUTH: "basic" }, /KORRAL_AUTH: must be/],
    [
      "oauth without its issuer",
      { KORRAL_AUTH: "oauth", KORRAL_OAUTH_RESOURCE: OAUTH.KORRAL_OAUTH_RESOURCE, ...POLICY },
      /KORRAL_OAUTH_ISSUER: required/,
    ],
    [
      "oauth without a store policy",
      {
        KORRAL_AUTH: "oauth",
        KORRAL_OAUTH_ISSUER: OAUTH.KORRAL_OAUTH_ISSUER,
        KORRAL_OAUTH_RESOURCE: OAUTH.KORRAL_OAUTH_RESOURCE,
      },
      /: KORRAL_POLICY_FILE or KORRAL_POLICY_SECRET: required when KORRAL_AUTH is not none/,
    ],
  ])("%s", async (_what, env, line) => {
    const run = await runToExit("http.js", { KORRAL_LOG_FILES: "off", ...env });
    expect(run.code).toBe(2);
    const lines = run.stderr.trimEnd().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(line);
  });

  it("with KORRAL_AUTH=none a non-loopback HOST passes the configuration (and gets to listen)", async () => {
    // 192.0.2.1 (TEST-NET-1) is no address of this machine: the listen fails, exit 1, after the
    // configuration was accepted; nothing ever listens beyond loopback.
    const run = await runToExit("http.js", {
      HOST: "192.0.2.1",
      KORRAL_AUTH: "none",
      KORRAL_LOG_FILES: "off",
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("EADDRNOTAVAIL");
  });
});
