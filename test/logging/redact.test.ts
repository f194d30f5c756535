import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ApiKey } from "../../src/keys/api-key.js";
import {
  CREDENTIAL_VALUES,
  JWT_SHAPE,
  REDACTED,
  redact,
  redactText,
} from "../../src/logging/redact.js";

// Fabricated credential shapes; none of them authenticates anything.
const SHAPES: Record<string, string> = {
  bearer: "Bearer abc123DEF456ghi789.jkl-mno_pqr",
  jwt: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
  skLive: "sk-live-4eC39HqLyjWDarjtT1zdp7dc",
  sk: "sk-proj-Ab12Cd34Ef56Gh78",
  ghp: "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
  akia: "AKIAIOSFODNN7EXAMPLE",
  slackBot: "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOp",
  slackUser: "xoxp-123456789012-1234567890123-1234567890123-abcdef",
  storelink: "slk_47_demo_7f3a91c2e5b8",
  stripeSecret: "sk_live_51HxAbCdEfGhIjKlMnOpQrSt",
  stripeRestricted: "rk_test_51HxAbCdEfGhIjKlMnOpQrSt",
  slackApp: "xapp-1-A0123456789-1234567890123-abcdef0123456789",
  slackRefresh: "xoxe-1-My0xLTEyMzQ1Njc4OTAx-abcdef",
  githubFineGrained: "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789",
  googleApiKey: "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
  bearerToken: "bearer token abc123DEF456ghi789",
  bearerBearer: "Bearer Bearer abc123DEF456ghi789",
  privateKey:
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1b2c3d4\nE5f6g7h8+/==\n-----END RSA PRIVATE KEY-----",
  privateKeyCut: "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
  jwtAfterHyphen: "x-eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln",
  authorizationBasic: "Authorization: Basic dXNlcjpodW50ZXIy",
  basic: "Basic dXNlcjpwYXNzd29yZA==",
  passwordAssignment: "password=hunter2Secret!",
  passwordColon: "Password: hunter2Secret",
  apiKeyAssignment: "api_key=AbC123xyz987QwE",
  apiKeyDash: "api-key: AbC123xyz987QwE",
  slackWebhook: "https://hooks.slack.com/services/T0000AAAA/B0000BBBB/XXXXXXXXXXXXXXXXXXXXXXXX",
  bearerColon: "Bearer: abc123DEF456ghi789",
  slackRotated: "xoxe.xoxp-1-Mi0yLTM0MTQwODM5NzM0OTItNDE2MjA2MjM2",
  gitlab: "glpat-z_sxgtrfAxKr8q1TPY8Y",
  gitlabNewer: "glpat-Ab3dEf6hIj9kLm2nOp5qRs8tUv1.01.0w1x2y3z4",
  npm: "npm_Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78",
  azureAccountKey:
    "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
  azureSharedAccessKey: "SharedAccessKey=Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78St90Uv=",
  secretColon: "secret: hunter2Secret",
  secretMixedCase: "SECRET: hQxKpLmZwRtY",
  secretAssignment: "secret=abc",
  secretKeyEnv: "SECRET_KEY=correcthorsebatterystaple",
};

/** Shapes whose match leaves a word or quotes around it: the text and what it becomes. */
const FRAMED: [string, string][] = [
  ["Secret: 'Ab12Cd34Ef56'", `${REDACTED}'`],
  ["jwt_secret: 9f8e7d6c5b4a", `jwt_${REDACTED}`],
  ["webhook-secret=x", `webhook-${REDACTED}`],
  ['"password": "hunter2Secret"', `"${REDACTED}"`],
  ['{"client_secret":"Ab12Cd34"}', `{"${REDACTED}"}`],
];

/**
 * URLs with userinfo: the userinfo goes and the rest of the URL stays, so an operator still sees
 * which host was meant. Each gives the text, what must not survive, and what must.
 */
const URLS: [string, string, string][] = [
  [
    "rediss://:Ab12Cd34-AUTH-string@10.0.0.3:6378",
    "Ab12Cd34-AUTH-string",
    "rediss://[REDACTED]@10.0.0.3:6378",
  ],
  [
    "redis://default:hunter2@redis.internal:6379/0",
    "hunter2",
    "redis://[REDACTED]@redis.internal:6379/0",
  ],
  [
    "https://deploy:p4ss@word@git.example.com/x.git",
    "ss@word",
    "https://[REDACTED]@git.example.com/x.git",
  ],
  [
    "https://ghx_sometokenvalue123@github.com/o/r",
    "sometokenvalue123",
    "https://[REDACTED]@github.com/o/r",
  ],
  ["postgres://app:S3cr%40t@db:5432/orders", "S3cr%40t", "postgres://[REDACTED]@db:5432/orders"],
  ["amqps://user:pa:ss@mq.example.com", "pa:ss", "amqps://[REDACTED]@mq.example.com"],
];

describe("redactText", () => {
  for (const [name, secret] of Object.entries(SHAPES)) {
    it(`strips a ${name} credential from free text`, () => {
      const text = `Buyer approved 5; ops pasted token ${secret} by mistake`;
      const out = redactText(text);
      // A shape glued to a word keeps the word ("x-"), and a key block cut off takes the rest.
      const kept = secret.startsWith("x-") ? "x-" : "";
      const rest = name === "privateKeyCut" ? "" : " by mistake";
      expect(out).toBe(`Buyer approved 5; ops pasted token ${kept}${REDACTED}${rest}`);
      expect(out).not.toContain(secret.slice(-8));
    });
  }

  it("gives the spec's example line", () => {
    expect(
      redactText("Buyer approved 5; ops pasted token sk-live-51Hx9QvLkT3dPz8 by mistake"),
    ).toBe("Buyer approved 5; ops pasted token [REDACTED] by mistake");
  });

  it("leaves an ordinary reason alone", () => {
    const reason =
      "Gap of 8 units at store 47 over 24h: on_hand 3 vs 11 sold. Buyer approved 24. Task-force ask.";
    expect(redactText(reason)).toBe(reason);
  });

  it("leaves ordinary words near the new shapes alone", () => {
    for (const reason of [
      "Basic supplies ran out at store 47; buyer approved 24.",
      "The password reset desk is closed; gap of 8, buyer approved 24.",
      "Our api key rotation is next week; gap of 8 at store 47.",
    ]) {
      expect(redactText(reason)).toBe(reason);
    }
  });

  it.each(FRAMED)("strips the value of %s", (text, expected) => {
    expect(redactText(`ops pasted ${text} by mistake`)).toBe(`ops pasted ${expected} by mistake`);
  });

  it.each(URLS)("strips the userinfo of %s and keeps the rest of the URL", (url, secret, kept) => {
    const out = redactText(`Limits store ${url} refused us; retrying`);
    expect(out).toBe(`Limits store ${kept} refused us; retrying`);
    expect(out).not.toContain(secret);
  });

  it("keeps the words that look like the new shapes but are not", () => {
    for (const reason of [
      // `secret:` in prose: short words, plain words, numbers, all capitals.
      "The secret: we ran out of stock twice; buyer approved 24.",
      "Top secret: promotion starts Friday at store 47, approved 24.",
      "Secret: 24 units held back for the launch; gap of 8.",
      "secret: everything sold before noon; SECRET: IMPORTANT restock.",
      "Secretary: Jane approved 24; our secrets: none, secret sauce: ketchup.",
      // npm's environment and folder names.
      "npm_config_cache and npm_package_version were unset; node_modules rebuilt; npm_modules too.",
      // URLs and addresses without userinfo.
      "See https://status.example.com/incidents/47 and write to ops@example.com about it.",
      "Ticket https://jira.example.com/browse/OPS-47?assignee=ops@example.com#c12 for the gap.",
      "Catalogue at https://example.com/items/@store47 lists 8847291.",
      // Words around the other new shapes.
      "The account key holder at store 47 and the glpat- prefix doc; gap of 8.",
      "Our shared access key policy changes next week; gap of 8 at store 47.",
    ]) {
      expect(redactText(reason)).toBe(reason);
    }
  });
});

describe("redact", () => {
  it("replaces values under sensitive keys wholesale, at any depth", () => {
    const out = redact({
      store_id: "47",
      api_key: "anything at all",
      nested: { Authorization: { scheme: "x" }, list: [{ session_id: 42, ok: "fine" }] },
      privateKey: "kept: the pattern is snake_case private_key",
      private_key: "gone",
      cookieJar: ["a"],
    });
    expect(out).toEqual({
      store_id: "47",
      api_key: REDACTED,
      nested: { Authorization: REDACTED, list: [{ session_id: REDACTED, ok: "fine" }] },
      privateKey: "kept: the pattern is snake_case private_key",
      private_key: REDACTED,
      cookieJar: REDACTED,
    });
  });

  it("strips credential-shaped values under innocent keys and inside arrays", () => {
    const out = redact({ reason: `see ${SHAPES.ghp}`, notes: [SHAPES.akia, 3] });
    expect(out).toEqual({ reason: `see ${REDACTED}`, notes: [REDACTED, 3] });
  });

  it("survives cycles, hostile getters, revoked proxies and odd scalars", () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    const hostile = Object.defineProperty({}, "boom", {
      enumerable: true,
      get() {
        throw new Error("nope");
      },
    });
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    const shared = { x: 1 };
    const out = redact({
      cyclic,
      hostile,
      proxy,
      big: 10n,
      nan: Number.NaN,
      fn: () => 1,
      sym: Symbol("s"),
      date: new Date("2026-08-13T12:49:20.918Z"),
      err: new Error(`failed with ${SHAPES.bearer}`),
      key: new ApiKey("slk_47_real_value_here"),
      twice: [shared, shared],
    });
    expect(out).toEqual({
      cyclic: { a: 1, self: "[Circular]" },
      hostile: { boom: "[Unreadable]" },
      proxy: "[Unreadable]",
      big: "10",
      nan: "NaN",
      date: "2026-08-13T12:49:20.918Z",
      err: { name: "Error", message: `failed with ${REDACTED}` },
      key: "[api key]",
      twice: [{ x: 1 }, { x: 1 }],
    });
    expect(redact(undefined)).toBeUndefined();
    expect(redact(null)).toBeNull();
  });

  it("never throws and always yields JSON-serialisable output", () => {
    fc.assert(
      fc.property(fc.anything({ withBigInt: true, withDate: true, withMap: true }), (value) => {
        const out = redact(value);
        expect(() => JSON.stringify(out)).not.toThrow();
      }),
      { numRuns: 300 },
    );
  });

  it("never lets a planted secret through, whatever surrounds it", () => {
    const secret = fc.constantFrom(...Object.values(SHAPES));
    const filler = fc.stringMatching(/^[ a-z0-9.,;:()]{0,20}$/);
    fc.assert(
      fc.property(filler, secret, filler, (before, s, after) => {
        const out = JSON.stringify(redact({ reason: `${before} ${s} ${after}` }));
        expect(out).not.toContain(s);
      }),
      { numRuns: 300 },
    );
  });

  it("never lets a URL's userinfo through, whatever surrounds it", () => {
    const url = fc.constantFrom(...URLS);
    const filler = fc.stringMatching(/^[ a-z0-9.,;:()@]{0,20}$/);
    fc.assert(
      fc.property(filler, url, filler, (before, [text, secret], after) => {
        const out = JSON.stringify(redact({ reason: `${before} ${text} ${after}` }));
        expect(out).not.toContain(secret);
      }),
      { numRuns: 300 },
    );
  });

  it("skips no string a full pass would change (the cheap pre-check is a superset)", () => {
    // Every pattern in redactText's order: Bearer, then JWTs (as a regex here), then the rest.
    const [bearer, ...rest] = CREDENTIAL_VALUES;
    const fullPass = (text: string): string =>
      [bearer as RegExp, JWT_SHAPE, ...rest].reduce(
        (out, pattern) => out.replace(pattern, REDACTED),
        text,
      );
    // Prefixes of every shape, in any case, followed by token-ish tails.
    const prefix = fc.constantFrom(
      "Bearer ",
      "bearer\t",
      "BEARER  ",
      "eyJ",
      "EYJ",
      "sk-",
      "SK-",
      "ghp_",
      "gho_",
      "ghs_",
      "github_pat_",
      "AKIA",
      "ASIA",
      "akia",
      "xoxb-",
      "xoxp-",
      "slk_",
      "SLK_",
      "sk_live_",
      "rk_test_",
      "xapp-",
      "xoxe-",
      "AIza",
      "bearer token ",
      "Bearer Bearer ",
      "x-eyJ",
      "_eyJ",
      "-----BEGIN PRIVATE KEY-----",
      "-----END PRIVATE KEY-----",
      "glpat-",
      "GLPAT-",
      "npm_",
      "NPM_",
      "AccountKey=",
      "accountkey: ",
      "SharedAccessKey=",
      "secret: ",
      "Secret:",
      "SECRET_KEY=",
      "jwt_secret=",
      '"secret": "',
      "https://",
      "rediss://:",
      "redis://user:",
      "://",
      "@",
      "",
    );
    const tail = fc.stringMatching(/^[A-Za-z0-9_.\-=+/~:@]{0,40}$/);
    const filler = fc.stringMatching(/^[ a-zA-Z0-9.,;:()_-]{0,12}$/);
    fc.assert(
      fc.property(fc.array(fc.tuple(filler, prefix, tail), { maxLength: 4 }), (parts) => {
        const text = parts.map(([f, p, t]) => `${f}${p}${t}`).join(" ");
        expect(redactText(text)).toBe(fullPass(text));
      }),
      { numRuns: 2_000 },
    );
  });
});
