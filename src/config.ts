import { fileURLToPath } from "node:url";
import { z } from "zod";
import {
  AUTH_VALUES,
  authKinds,
  authProblems,
  authUrlProblem,
  CLAIM_MESSAGE,
  CLAIM_NAME,
  GOOGLE_CERTS_URL,
  isLoopbackUrl,
  SCOPE_MESSAGE,
  SCOPE_TOKEN,
} from "./config/auth.js";
import {
  type ConfigOf,
  commaList,
  type Documented,
  isOn,
  onOff,
  readConfig,
  schemaOf,
  variable,
} from "./config/declare.js";
import { hostPatternProblem } from "./config/host-patterns.js";
import { labelProblem } from "./config/principal-label.js";

export const DEFAULT_SECRET_NAME_PATTERN =
  "projects/{project}/secrets/storelink-key-{store}/versions/latest";

/** The longest shutdown grace Cloud Run leaves room for (see KORRAL_SHUTDOWN_GRACE_MS). */
export const CLOUD_RUN_MAX_GRACE_MS = 9_000;

/** At least 32 bytes: an HMAC key of the confirmation state. */
const stateKey = z
  .string()
  .refine((key) => Buffer.byteLength(key, "utf8") >= 32, "must be at least 32 bytes")
  .optional();

const WRITE_SAFETY = "docs/write-safety.md";

/** A Secret Manager secret id, and a secret version's full resource name (KORRAL_POLICY_SECRET). */
const SECRET_ID = /[A-Za-z0-9_-]{1,255}/;
const SECRET_VERSION_NAME =
  /projects\/[a-z0-9-]{1,30}\/secrets\/[A-Za-z0-9_-]{1,255}\/versions\/(?:latest|[1-9][0-9]{0,18})/;

/**
 * Every environment variable, declared once (see config/declare.ts): validation and default,
 * where its value lands in `Config`, and its lines in docs/configuration.md, DEPLOYMENT.md and
 * the pages that list it (`npm run texts` writes them). Read once at start; a bad value stops
 * startup with a message naming the variable. Links in the texts are written from the project
 * root.
 */
export const VARIABLES = {
  PORT: variable({
    schema: z.coerce.number().int().min(0).max(65535).default(8080),
    to: ["port"],
    doc: "HTTP port; `0` picks a free port and logs the bound one.",
    cloudRun: "set by Cloud Run (8080)",
    listedIn: ["README.md"],
  }),
  HOST: variable({
    schema: z.string().min(1).default("127.0.0.1"),
    to: ["host"],
    doc: "HTTP bind address; the container sets `0.0.0.0`.",
    cloudRun: "`0.0.0.0` (baked into the image)",
    listedIn: ["README.md"],
  }),
  KORRAL_KEYS_FILE: variable({
    schema: z
      .string()
      .min(1)
      .default(fileURLToPath(new URL("../keys.json", import.meta.url))),
    to: ["keysFile"],
    doc: "The per-store key file of the `file` key source, re-read on every call.",
    shownDefault: "<install>/keys.json",
    cloudRun: "unused",
    cloudRunNote: "the `file` source only",
    listedIn: ["README.md"],
  }),
  KORRAL_KEY_SOURCE: variable({
    schema: z.enum(["file", "secret-manager"]).default("file"),
    to: ["keySource"],
    doc: "Where per-store keys come from: `file` or `secret-manager` ([keys](docs/keys.md)).",
    cloudRun: "`secret-manager`",
    cloudRunNote: "the image default is `file`, for local runs",
  }),
  GOOGLE_CLOUD_PROJECT: variable({
    schema: z
      .string()
      .regex(/^[a-z][a-z0-9-]{4,28}[a-z0-9]$/, "must be a GCP project id")
      .optional(),
    to: ["googleCloudProject", "secretManager.project"],
    doc: "GCP project id: of the store secrets (required with `secret-manager` when the pattern uses `{project}`) and of `logging.googleapis.com/trace` on HTTP-mode log lines. Cloud Run does not set it: the deploy command does.",
    cloudRun: "your project id",
    cloudRunNote: "required with `secret-manager`; also links log lines to request traces",
    listedIn: ["docs/logging.md"],
  }),
  KORRAL_SECRET_NAME_PATTERN: variable({
    schema: z
      .string()
      .regex(/\{store\}/, "must contain {store}")
      .default(DEFAULT_SECRET_NAME_PATTERN),
    to: ["secretManager.namePattern"],
    doc: "Secret version per store; must contain `{store}` (store ids are letters and digits only).",
    cloudRun: "leave unset",
  }),
  KORRAL_KEY_CACHE_SECONDS: variable({
    schema: z.coerce.number().int().min(0).max(300).default(0),
    to: ["secretManager.cacheSeconds"],
    doc: "Cache present Secret Manager keys this long (0 to 300); 0 re-reads on every lookup (the spec's default). The reload after a 401 always bypasses it.",
    cloudRun: "`0`",
    cloudRunNote: 'see "Key lookups" above',
  }),
  KORRAL_KEY_DEADLINE_MS: variable({
    schema: z.coerce.number().int().min(100).max(30_000).default(3000),
    to: ["secretManager.deadlineMs"],
    doc: "Upper bound on one Secret Manager lookup, library retries included (100 to 30000).",
    cloudRun: "`3000`",
  }),
  KORRAL_POLICY_FILE: variable({
    schema: z.string().min(1).optional(),
    to: [],
    doc: "The store policy as a JSON file ([identity.md](docs/identity.md#store-policy)): a regular file, not a symbolic link, at most 1 MiB. Refused together with `KORRAL_POLICY_SECRET`. Every tool call is checked against it for its principal. On HTTP with `KORRAL_AUTH` other than `none` one of the two is required (the start is refused otherwise, exit 2, naming both); unset with `none` and on stdio, every caller may use every store.",
    cloudRun: "unused",
    cloudRunNote: "the store policy as a file, for local runs",
  }),
  KORRAL_POLICY_SECRET: variable({
    schema: z
      .string()
      .regex(
        new RegExp(`^(?:${SECRET_ID.source}|${SECRET_VERSION_NAME.source})$`),
        "must be a secret id (letters, digits, - and _) or projects/<project>/secrets/<id>/versions/<latest or a number>",
      )
      .optional(),
    to: [],
    doc: "The store policy in Secret Manager: a secret id (its latest version, in `GOOGLE_CLOUD_PROJECT`, then required) or a version's full name `projects/<project>/secrets/<id>/versions/<latest or a number>`. Read with `KORRAL_KEY_DEADLINE_MS` as its deadline.",
    cloudRun: "`storelink-policy` (section 3)",
    cloudRunNote:
      "the store policy in Secret Manager ([docs/identity.md](docs/identity.md#store-policy)), checked on every tool call; required with `KORRAL_AUTH`",
  }),
  KORRAL_POLICY_CACHE_SECONDS: variable({
    schema: z.coerce.number().int().min(0).max(300).default(10),
    to: ["policy.cacheSeconds"],
    doc: "How long a policy read is used before a call reads it again (0 to 300; 0 reads on every call). A policy that could not be read is tried again after at most a second.",
    cloudRun: "`10`",
    cloudRunNote: "a grant or revocation is in force within it",
  }),
  /** stdio: the label of `local:<label>` (see policy/principal.ts). */
  KORRAL_PRINCIPAL: variable({
    schema: z
      .string()
      .superRefine((label, ctx) => {
        const problem = labelProblem(label);
        if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
      })
      .optional(),
    to: ["principalLabel"],
    doc: "stdio: who the buyer is, as `local:<label>` (1 to 64 letters, digits, `.` `_` `@` `+` `-`, starting with a letter or digit). Unset: the OS account, `os:<login>@<host>`. Unverified either way ([identity.md](docs/identity.md#principals)).",
    cloudRun: "unused",
    cloudRunNote: "stdio only",
  }),
  KORRAL_LOG_DIR: variable({
    schema: z
      .string()
      .min(1)
      .default(fileURLToPath(new URL("../log", import.meta.url))),
    to: ["logDir"],
    doc: "Where `trace.jsonl` and `audit.log` go (created if missing).",
    shownDefault: "<install>/log",
    cloudRun: "unused with `KORRAL_LOG_FILES=off`",
    listedIn: ["README.md", "docs/logging.md"],
  }),
  KORRAL_DEDUPE_WINDOW_MIN: variable({
    schema: z.coerce.number().min(0).max(1440).default(10),
    to: ["dedupeWindowMs"],
    read: (minutes) => minutes * 60_000,
    doc: `Minutes an identical order without an \`idempotency_key\` is folded into the first (0 off), by the embedded StoreLink only: the emulator and the real StoreLink own their window ([idempotency](${WRITE_SAFETY}#idempotency)).`,
    cloudRun: "unused",
    cloudRunNote: "the real StoreLink owns its own window",
  }),
  KORRAL_ORDER_CAP_PER_HOUR: variable({
    schema: z.coerce.number().int().min(0).max(1000).default(3),
    to: ["orderCapPerHour"],
    doc: `The loop guard: new orders per store and SKU in a rolling hour, for the fleet with \`KORRAL_REDIS_URL\` (else per instance); \`0\` turns it off. Its rule: [the loop guard](${WRITE_SAFETY}#loop-guard).`,
    cloudRun: "`3`",
    cloudRunNote: "counted for the whole service in Memorystore",
    listedIn: ["README.md"],
  }),
  KORRAL_ELICIT_CONFIRMATION: variable({
    schema: onOff('must be "on" or "off"').default("on"),
    to: ["elicitConfirmation"],
    read: isOn,
    doc: `\`off\` stops asking the buyer to confirm orders ([confirmation](${WRITE_SAFETY}#confirmation)).`,
    cloudRun: "`on`",
  }),
  KORRAL_REQUIRE_CONFIRMATION: variable({
    schema: onOff('must be "true" or "false"').default("false"),
    to: ["requireConfirmation"],
    read: isOn,
    doc: `\`true\`: an order the buyer cannot be asked to confirm is refused (\`not_confirmed\`, nothing sent) instead of written with \`confirmed=agent\`. Who can be asked: [confirmation](${WRITE_SAFETY}#confirmation).`,
    cloudRun: '`true` (the decision in "Why these values")',
    cloudRunNote:
      'on this HTTP service no MCP 2025-06-18 client can be asked; `false` writes their orders `confirmed=agent` (see "What operators see in the audit")',
    listedIn: ["README.md"],
  }),
  /** Unset: each process draws its own (see policy/request-state.ts). */
  KORRAL_REQUEST_STATE_KEY: variable({
    schema: stateKey,
    to: ["requestStateKey"],
    doc: "The key (at least 32 bytes) that signs the confirmation state of MCP 2026-07-28 clients between their two round trips. Every replica of a service must share it; required on HTTP when `NODE_ENV=production` (from Secret Manager, see DEPLOYMENT.md). Unset: a random key per process (stdio silently; local HTTP says so in one start-up line).",
    cloudRun: "from Secret Manager (`--set-secrets`, section 3)",
    cloudRunNote: "required in production: every replica needs the same value",
  }),
  /** Accepted, never signed with (a rotation); see policy/request-state.ts. */
  KORRAL_REQUEST_STATE_KEY_PREVIOUS: variable({
    schema: stateKey,
    to: ["previousRequestStateKey"],
    doc: 'The request-state key being rotated out (at least 32 bytes): state it signed is still accepted, never signed with. Set it to the old key when `KORRAL_REQUEST_STATE_KEY` changes, and remove it in a later deploy (after 5 minutes, the state\'s life). See DEPLOYMENT.md, "Rotating the request-state key".',
    cloudRun: "only during a roll (section 8)",
  }),
  KORRAL_ALLOWED_HOSTS: variable({
    schema: commaList.superRefine((entries, ctx) => {
      for (const entry of entries) {
        const problem = hostPatternProblem(entry);
        if (problem !== undefined)
          ctx.addIssue({ code: "custom", message: `"${entry}" ${problem}` });
      }
    }),
    to: ["allowedHosts"],
    doc: "Comma-separated host names accepted in the HTTP `Host` header, besides `localhost`, `127.0.0.1` and `[::1]` (always accepted): exact names (`korral-storelink-abc123-lm.a.run.app`), `*.korral.example` (one label in front, never the bare domain) or `*---korral-storelink-abc123-lm.a.run.app` (a Cloud Run revision tag in front). Too-broad patterns (`*`, `*.com`, `*.run.app`, ...) stop startup. Unset: the loopback names only when listening on loopback (any spelling: all of 127.0.0.0/8, `::1` in any form, `localhost`), any Host otherwise. Other hosts get 403.",
    cloudRun: "the service's host names (section 5)",
    cloudRunNote: "see section 6",
  }),
  KORRAL_ALLOWED_ORIGINS: variable({
    schema: commaList,
    to: ["allowedOrigins"],
    doc: "Comma-separated browser origins accepted in the `Origin` header, e.g. `https://agent.korral.example`. Requests without `Origin` (non-browser MCP clients) and localhost pages are always accepted; any other Origin gets 403.",
    cloudRun: "unset",
    cloudRunNote: "see section 6",
  }),
  /** Set: the limits are the fleet's, on this Redis; a secret. */
  KORRAL_REDIS_URL: variable({
    schema: z
      .string()
      .superRefine((value, ctx) => {
        const problem = redisUrlProblem(value);
        if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
      })
      .optional(),
    to: ["redisUrl"],
    doc: "The shared limits store (Memorystore, on the Redis protocol): `redis://` or `rediss://`, the AUTH string as the URL's password (`rediss://:AUTH@10.0.0.3:6378`). Set: the order cap and the rate limit count across every replica that shares it. A secret: never logged, never repeated in an error, and the start-up line says only `limits: \"shared (redis)\"`. With `rediss://` the server's CA is trusted through `NODE_EXTRA_CA_CERTS`. A URL the Redis client cannot use (a path other than a database number such as `/0`, a malformed `%`-escape in the user or password, port 0) stops the start (exit 2) naming the variable, never its text. See [shared limits](docs/configuration.md#shared-limits).",
    cloudRun: "from Secret Manager (`--set-secrets`, section 4)",
    cloudRunNote:
      "required in production unless `KORRAL_LIMITS=per-instance`: the limits store every replica shares; never logged",
    listedIn: ["README.md"],
  }),
  KORRAL_RECONCILE_GRACE_MS: variable({
    schema: z.coerce.number().int().min(0).max(3_600_000).default(60_000),
    to: ["reconcileGraceMs"],
    doc: `How long after a write of unknown outcome the reconciler waits before it fences the key StoreLink has no record of (0 to 3600000): meanwhile the agent's own same-key retry may still place the order the buyer approved. An order StoreLink holds is resolved at once ([reconciliation](${WRITE_SAFETY}#reconciliation)).`,
    cloudRun: "`60000`",
  }),
  KORRAL_RECONCILE_INTERVAL_MS: variable({
    schema: z.coerce.number().int().min(1_000).max(3_600_000).default(30_000),
    to: ["reconcileIntervalMs"],
    doc: "How often each instance's reconciler looks for writes of unknown outcome (1000 to 3600000); it also runs at start and on `POST /internal/reconcile`.",
    cloudRun: "`30000`",
    cloudRunNote:
      "with a Cloud Scheduler job on `POST /internal/reconcile`: Cloud Run throttles an idle instance's CPU",
  }),
  KORRAL_REDIS_TIMEOUT_MS: variable({
    schema: z.coerce.number().int().min(10).max(5_000).default(300),
    to: ["redisTimeoutMs"],
    doc: "The deadline of each limits-store command (10 to 5000): past it the store counts as unreachable, and writes are refused (fail closed).",
    cloudRun: "`300`",
  }),
  KORRAL_REDIS_ALERT_AFTER_MS: variable({
    schema: z.coerce.number().int().min(0).max(3_600_000).default(120_000),
    to: ["redisAlertAfterMs"],
    doc: "How long a limits store not reached since start may stay so before the ops log's `limits store unreachable` line (the alert's): an instance's network can take up to a minute to come up. A store lost after it answered, or refusing the certificate or the AUTH string, is said at once.",
    cloudRun: "`120000`",
    cloudRunNote: "Direct VPC egress can take a minute to come up (section 7's alert)",
  }),
  /** Whether the operator said the limits are meant per instance. */
  KORRAL_LIMITS: variable({
    schema: z
      .enum(["per-instance", "shared"], { error: 'must be "per-instance" or "shared" (or unset)' })
      .optional(),
    to: ["limitsPerInstance"],
    read: (value) => value === "per-instance",
    doc: "`per-instance`: the order cap and the rate limit are counted by each process, on purpose (one instance). On HTTP with `NODE_ENV=production`, startup stops (exit 2, one line naming `KORRAL_REDIS_URL` and `KORRAL_LIMITS`) unless `KORRAL_REDIS_URL` is set or this says `per-instance`. `shared` only asserts that `KORRAL_REDIS_URL` is set.",
    cloudRun: "unset",
    cloudRunNote: "`per-instance` for a service meant to run as one instance (`--max-instances=1`)",
  }),
  KORRAL_RATE_LIMIT_PER_MIN: variable({
    schema: z.coerce.number().int().min(0).max(1_000_000).default(600),
    to: ["rateLimitPerMin"],
    doc: "Tool calls a minute per caller (for the fleet with `KORRAL_REDIS_URL`, else per instance); `0` turns the backstop off. See [the rate limit](docs/configuration.md#rate-limit).",
    cloudRun: "`600`",
    cloudRunNote: "see section 6",
  }),
  LOG_LEVEL: variable({
    schema: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
    to: ["logLevel"],
    doc: "Operational log level on stderr (`debug` adds one HTTP access line per request, and in stdio mode the start-up configuration summary).",
    cloudRun: "`info`",
    listedIn: ["README.md", "docs/logging.md"],
  }),
  KORRAL_LOG_FILES: variable({
    schema: onOff('must be "on" or "off"').default("on"),
    to: ["logFiles"],
    read: isOn,
    doc: "`off` stops writing `trace.jsonl` and `audit.log` (Cloud Run: its disk is memory); in HTTP mode every record also goes to stdout for Cloud Logging ([logging](docs/logging.md)).",
    cloudRun: "`off`",
    cloudRunNote:
      "records go to Cloud Logging as stdout lines (written whenever the files are off, and in production when stdout is not a terminal)",
    listedIn: ["docs/logging.md"],
  }),
  STORELINK_URL: variable({
    schema: z.url({ protocol: /^https?$/ }).optional(),
    to: ["storelinkUrl"],
    doc: "Base URL of StoreLink over HTTP (e.g. `http://127.0.0.1:8090`); unset, the embedded in-memory StoreLink (refused in production: `NODE_ENV`). The start-up line and `/healthz` show its host only.",
    cloudRun: "StoreLink's base URL (required)",
    listedIn: ["README.md"],
  }),
  KORRAL_STORELINK: variable({
    schema: z
      .enum(["embedded", "desktop"], { error: 'must be "embedded" or "desktop" (or unset)' })
      .optional(),
    to: [],
    doc: "`embedded`: run the seeded in-memory demo StoreLink on purpose where `NODE_ENV=production` would otherwise refuse to start without `STORELINK_URL`. Refused together with `STORELINK_URL`. `desktop` (what the MCP Bundle sets): the StoreLink at `STORELINK_URL`, or the embedded demo when it is empty, whatever `NODE_ENV` the desktop's environment passes on.",
    cloudRun: "unset",
    cloudRunNote:
      "`embedded` runs the demo StoreLink on purpose (orders die with the instance; `--max-instances=1`)",
  }),
  NODE_ENV: variable({
    schema: z.string().optional(),
    to: ["production"],
    read: (value) => value === "production",
    doc: "`production` (the container image sets it): without `STORELINK_URL` or `KORRAL_STORELINK=embedded`, startup stops with one line naming `STORELINK_URL` (exit 2), so a deployment never runs the demo StoreLink by accident. Also turns on the HTTP-mode stdout log lines ([logging](docs/logging.md)).",
    cloudRun: "`production` (baked into the image)",
  }),
  KORRAL_SHUTDOWN_GRACE_MS: variable({
    schema: z.coerce.number().int().min(0).max(600_000).default(8_000),
    to: ["shutdownGraceMs"],
    doc: `How long SIGTERM (and, on stdio, the end of stdin) waits for running requests and tool calls; a write still running then is audited \`UNCERTAIN\` and the process exits 1. At most ${CLOUD_RUN_MAX_GRACE_MS} on Cloud Run (where \`K_SERVICE\` is set), which kills the container 10 s after SIGTERM. See [shutdown](docs/configuration.md#shutdown).`,
    cloudRun: "`8000`",
    cloudRunNote: `at most ${CLOUD_RUN_MAX_GRACE_MS} (SIGKILL comes 10 s after SIGTERM; up to 1 s more goes to flushing logs)`,
  }),
  STORELINK_TIMEOUT_MS: variable({
    schema: z.coerce.number().int().min(1).max(120_000).default(5_000),
    to: ["storelinkTimeoutMs"],
    doc: "Per-request deadline of the HTTP StoreLink client (connect, headers and body).",
    cloudRun: "`5000`",
    cloudRunNote: "a write that times out is reported `outcome_unknown`, never retried",
  }),
  // HTTP authentication: the resource server of src/http/auth/ (docs/configuration.md#http-authentication).
  KORRAL_AUTH: variable({
    schema: z
      .string()
      .transform((value, ctx) => {
        const kinds = authKinds(value);
        if (kinds === undefined) ctx.addIssue({ code: "custom", message: AUTH_VALUES });
        return kinds ?? [];
      })
      .optional(),
    to: ["auth.kinds"],
    read: (kinds) => kinds ?? [],
    doc: "Who may call over HTTP, verified: `oauth` (JWT access tokens of `KORRAL_OAUTH_ISSUER`), `google` (Google-signed ID tokens, `KORRAL_GOOGLE_AUDIENCES`), `oauth,google` (both, told apart by the token's issuer), or `none` (every caller accepted unverified). Unset: `none` when `HOST` is loopback (the README's commands need nothing); any other `HOST` refuses to start (exit 2, one line naming `KORRAL_AUTH`), and `none`, set or implied, is refused with `NODE_ENV=production`. stdio ignores it. See [HTTP authentication](docs/configuration.md#http-authentication).",
    cloudRun: "`google` (section 5)",
    cloudRunNote:
      "required with `NODE_ENV=production`, where `none` is refused; `oauth` for an OAuth authorization server's tokens",
  }),
  KORRAL_OAUTH_ISSUER: variable({
    schema: z
      .string()
      .superRefine((value, ctx) => {
        const problem = authUrlProblem(value, "issuer");
        if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
      })
      .optional(),
    to: ["auth.issuer"],
    read: (issuer) => issuer ?? "",
    doc: "The authorization server (its `iss`, byte for byte; `https://`, `http://` only on loopback); required with `oauth`. Its keys are found through its metadata (`/.well-known/oauth-authorization-server`, else `openid-configuration`), read once and kept.",
    cloudRun: "with `oauth` only",
    cloudRunNote: "the authorization server",
  }),
  KORRAL_OAUTH_RESOURCE: variable({
    schema: z
      .string()
      .superRefine((value, ctx) => {
        const problem = authUrlProblem(value, "resource");
        if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
      })
      .optional(),
    to: ["auth.resource"],
    read: (resource) => resource ?? "",
    doc: "This service's canonical MCP URL, e.g. `https://storelink-mcp.korral.example/mcp`: the RFC 8707 resource the tokens must be issued for (`aud`), the `resource` of the RFC 9728 metadata, and where the 401's `resource_metadata` points (never built from the request's `Host`). Required with `oauth`.",
    cloudRun: "with `oauth` only",
    cloudRunNote: "the service's canonical MCP URL (the tokens' audience)",
  }),
  KORRAL_OAUTH_AUDIENCES: variable({
    schema: commaList,
    to: ["auth.audiences"],
    doc: "Comma-separated `aud` values accepted besides the resource (an IdP that names the API by another identifier).",
    cloudRun: "unset",
  }),
  KORRAL_OAUTH_READ_SCOPE: variable({
    schema: z.string().regex(SCOPE_TOKEN, SCOPE_MESSAGE).default("storelink.read"),
    to: ["auth.readScope"],
    doc: "The scope every call needs (in the token's `scope` or `scp` claim); without it, 403 `insufficient_scope`. Google principals are given both scopes (their stores are the store policy's to limit).",
    cloudRun: "unset",
  }),
  KORRAL_OAUTH_ORDER_SCOPE: variable({
    schema: z.string().regex(SCOPE_TOKEN, SCOPE_MESSAGE).default("storelink.order"),
    to: ["auth.orderScope"],
    doc: "The scope `create_replenishment_order` needs, in any batch element, `dry_run` included; without it, 403 `insufficient_scope` naming both scopes (the client asks the buyer for more).",
    cloudRun: "unset",
  }),
  KORRAL_OAUTH_PRINCIPAL_CLAIM: variable({
    schema: z.string().regex(CLAIM_NAME, CLAIM_MESSAGE).default("email"),
    to: ["auth.principalClaim"],
    doc: "The access-token claim that names the person: the principal is `user:<value>` (`svc:<value>` for a `…gserviceaccount.com` address). A token without it is a client's own (client credentials, `sub` = its client id): `client:<client_id>`; anything else is refused.",
    cloudRun: "unset",
  }),
  KORRAL_OAUTH_GROUPS_CLAIM: variable({
    schema: z.string().regex(CLAIM_NAME, CLAIM_MESSAGE).optional(),
    to: ["auth.groupsClaim"],
    doc: "The access-token claim that lists the caller's groups at the identity provider (`groups`, or a namespaced one such as `https://korral.example/groups`): a list of names, or one name. The store policy's `idp_groups` maps them to its groups ([identity.md](docs/identity.md#store-policy)). Unset: no groups are read. Google ID tokens carry none.",
    cloudRun: "with `oauth` only",
    cloudRunNote: "when the policy grants stores through `idp_groups`",
  }),
  KORRAL_GOOGLE_AUDIENCES: variable({
    schema: commaList,
    to: ["auth.googleAudiences"],
    doc: "Comma-separated `aud` values a Google ID token may carry (the service's URLs, as the caller asked for its token); required with `google`. The token must carry a verified `email`: `svc:<email>` for a service account, `user:<email>` for a person.",
    cloudRun: "the service's URLs (section 5)",
    cloudRunNote: "the `aud` a caller's Google ID token must name",
  }),
  KORRAL_TEST_GOOGLE_CERTS_URL: variable({
    schema: z
      .string()
      .superRefine((value, ctx) => {
        if (!isLoopbackUrl(value)) {
          ctx.addIssue({
            code: "custom",
            message: "tests only: must be an http(s) URL on loopback",
          });
        }
      })
      .optional(),
    to: ["auth.googleCertsUrl"],
    read: (url) => url ?? GOOGLE_CERTS_URL,
    doc: `**Tests only**: where Google's signing keys are read instead of Google's own (\`${GOOGLE_CERTS_URL}\`), so a test can sign Google-shaped tokens with a key of its own. Only a loopback \`http(s)://\` URL is accepted; never set it in a deployment.`,
    cloudRun: "never",
    cloudRunNote: "tests only (a loopback URL); refused otherwise",
  }),
};

/** Variables Node reads itself: documented beside the server's, never validated here. */
export const NODE_VARIABLES: Readonly<Record<string, Documented>> = {
  NODE_EXTRA_CA_CERTS: {
    doc: "Node's own: a PEM file of extra CAs to trust (StoreLink's internal CA, Memorystore's), read once at start.",
    cloudRun: "the mounted `storelink-ca` file (section 3)",
  },
};

export type VariableName = keyof typeof VARIABLES;

const schema = schemaOf(VARIABLES);

/** Where the store policy is read: read from two variables at once (see loadConfig). */
export type PolicySource = Readonly<
  { kind: "file"; path: string } | { kind: "secret"; name: string }
>;

/** Fields read from several variables at once, by group; the rest come from one declaration each. */
type Derived = {
  /** undefined: no store policy configured. */
  policy: { source: PolicySource | undefined };
};

/** All configuration: each field from the variable whose declaration names it (`VARIABLES`). */
export type Config = ConfigOf<typeof VARIABLES, Derived>;

/**
 * Why the Redis client could not use `value`, or undefined: the rules of node-redis's own URL
 * parser (`RedisClient.parseURL`), checked here so a URL it would refuse stops the start with the
 * variable named. The reasons never quote the URL (it holds the AUTH string).
 */
export function redisUrlProblem(value: string): string | undefined {
  const SCHEME = "must be a redis:// or rediss:// URL (its text is not repeated here)";
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return SCHEME;
  }
  if ((url.protocol !== "redis:" && url.protocol !== "rediss:") || url.hostname === "") {
    return SCHEME;
  }
  const unusable = (why: string) =>
    `the Redis client cannot use it: ${why} (its text is not repeated here)`;
  if (url.port !== "" && Number(url.port) < 1) return unusable("its port must be 1 to 65535");
  for (const [part, text] of [
    ["user", url.username],
    ["password", url.password],
  ] as const) {
    try {
      decodeURIComponent(text);
    } catch {
      return unusable(`its ${part} has a malformed %-escape`);
    }
  }
  // The path names a database (a number) or nothing; anything else the client refuses.
  if (url.pathname.length > 1 && !/^\/\d{1,9}$/.test(url.pathname)) {
    return unusable("its path must be empty or a database number such as /0");
  }
  return undefined;
}

export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

/**
 * Validates environment variables against `envSchema`. Empty strings count as unset, as they do
 * in most deployment tools; a failure names every bad variable.
 */
export function parseEnv<S extends z.ZodType>(
  envSchema: S,
  env: NodeJS.ProcessEnv,
  what: string,
): z.infer<S> {
  const { data, problems } = checkEnv(envSchema, env);
  if (problems.length > 0) throw new ConfigError(`Invalid ${what}: ${problems.join("; ")}`);
  return data;
}

/**
 * Every problem of `env` at once, and the values read with the bad variables left unset, so that
 * the checks across variables can run too (one start tells the operator everything).
 */
function checkEnv<S extends z.ZodType>(
  envSchema: S,
  env: NodeJS.ProcessEnv,
): { data: z.infer<S>; problems: string[]; invalid: ReadonlySet<string> } {
  const present: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (value !== undefined && value !== "") present[name] = value;
  }
  const problems: string[] = [];
  const invalid = new Set<string>();
  // A value of only whitespace is a mistake, never "unset": " " would coerce to 0 and turn the
  // cap, the rate limit or the grace off without a word.
  const names = Object.keys(envSchema instanceof z.ZodObject ? envSchema.shape : {});
  for (const name of names) {
    if (typeof present[name] === "string" && present[name].trim() === "") {
      problems.push(`${name}: is only whitespace; unset it or give a value`);
      invalid.add(name);
    }
  }
  let parsed = envSchema.safeParse(withoutNames(present, invalid));
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      problems.push(`${issue.path.join(".")}: ${issue.message}`);
      invalid.add(String(issue.path[0]));
    }
    parsed = envSchema.safeParse(withoutNames(present, invalid));
    if (!parsed.success) throw new ConfigError(`Invalid configuration: ${problems.join("; ")}`);
  }
  return { data: parsed.data, problems, invalid };
}

function withoutNames(
  values: Record<string, string>,
  names: ReadonlySet<string>,
): Record<string, string> {
  return Object.fromEntries(Object.entries(values).filter(([name]) => !names.has(name)));
}

/** Where the configuration is read: the HTTP entry has requirements of its own in production. */
export type Entry = "http" | "stdio";

/**
 * The configuration, or a ConfigError listing every missing or invalid variable (one line), so
 * one failed start tells the operator all of it. `entry` adds what that entry needs on its own.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, entry?: Entry): Config {
  const { data: c, problems, invalid } = checkEnv(schema, env);
  /** Set, or named as invalid already: no second line about the same variable. */
  const given = (name: VariableName): boolean => c[name] !== undefined || invalid.has(name);
  if (
    c.KORRAL_KEY_SOURCE === "secret-manager" &&
    c.KORRAL_SECRET_NAME_PATTERN.includes("{project}") &&
    !given("GOOGLE_CLOUD_PROJECT")
  ) {
    problems.push(
      "GOOGLE_CLOUD_PROJECT: required when KORRAL_KEY_SOURCE=secret-manager (the secret name pattern uses {project})",
    );
  }
  if (c.KORRAL_POLICY_FILE !== undefined && c.KORRAL_POLICY_SECRET !== undefined) {
    problems.push(
      "KORRAL_POLICY_FILE and KORRAL_POLICY_SECRET are both set; the store policy has one source, unset one",
    );
  }
  const policySecretIsId =
    c.KORRAL_POLICY_SECRET !== undefined && !c.KORRAL_POLICY_SECRET.startsWith("projects/");
  if (policySecretIsId && !given("GOOGLE_CLOUD_PROJECT")) {
    problems.push(
      "GOOGLE_CLOUD_PROJECT: required when KORRAL_POLICY_SECRET is a secret id (or give the version's full name, projects/<project>/secrets/<id>/versions/latest)",
    );
  }
  const production = c.NODE_ENV === "production";
  // Cloud Run (which sets K_SERVICE) kills the container 10 s after SIGTERM; the logs' flush needs
  // up to a second of that. A longer grace would be cut short mid-audit.
  if (env.K_SERVICE !== undefined && c.KORRAL_SHUTDOWN_GRACE_MS > CLOUD_RUN_MAX_GRACE_MS) {
    problems.push(
      `KORRAL_SHUTDOWN_GRACE_MS: at most ${CLOUD_RUN_MAX_GRACE_MS} on Cloud Run (K_SERVICE is set), which kills the container 10 s after SIGTERM`,
    );
  }
  if (c.STORELINK_URL !== undefined && c.KORRAL_STORELINK === "embedded") {
    problems.push(
      "KORRAL_STORELINK=embedded and STORELINK_URL are both set; unset one (STORELINK_URL for the real StoreLink, KORRAL_STORELINK=embedded for the demo)",
    );
  }
  if (production && !given("STORELINK_URL") && !given("KORRAL_STORELINK")) {
    problems.push(
      "STORELINK_URL: required when NODE_ENV=production; set it to StoreLink's base URL (or set KORRAL_STORELINK=embedded to run the seeded demo StoreLink on purpose)",
    );
  }
  if (c.KORRAL_REDIS_URL !== undefined && c.KORRAL_LIMITS === "per-instance") {
    problems.push(
      "KORRAL_LIMITS=per-instance and KORRAL_REDIS_URL are both set; unset one (KORRAL_REDIS_URL for limits shared by every replica, KORRAL_LIMITS=per-instance for one instance)",
    );
  }
  if (!given("KORRAL_REDIS_URL") && c.KORRAL_LIMITS === "shared") {
    problems.push(
      "KORRAL_LIMITS=shared needs KORRAL_REDIS_URL, the limits store every replica shares",
    );
  }
  if (entry === "http" && production) {
    // Replicas must share the key that signs confirmation state, or a buyer's answer reaching
    // another replica is refused.
    if (!given("KORRAL_REQUEST_STATE_KEY")) {
      problems.push(
        "KORRAL_REQUEST_STATE_KEY: required on HTTP when NODE_ENV=production; set it from Secret Manager (at least 32 bytes, the same for every replica; see DEPLOYMENT.md)",
      );
    }
    // Several replicas count the order cap and the rate limit as one only on a shared store:
    // production says where it is, or that one instance is meant.
    if (!given("KORRAL_REDIS_URL") && !given("KORRAL_LIMITS")) {
      problems.push(
        "KORRAL_REDIS_URL: required on HTTP when NODE_ENV=production, so every replica counts the order cap and the rate limit together; set it to the limits store (see DEPLOYMENT.md), or set KORRAL_LIMITS=per-instance if one instance is meant",
      );
    }
  }
  problems.push(
    ...authProblems(c, { host: c.HOST, production, http: entry === "http" }, (name) =>
      invalid.has(name),
    ),
  );
  if (problems.length > 0) {
    throw new ConfigError(`Invalid configuration: ${problems.join("; ")}`);
  }
  const policySource: PolicySource | undefined =
    c.KORRAL_POLICY_FILE !== undefined
      ? { kind: "file", path: c.KORRAL_POLICY_FILE }
      : c.KORRAL_POLICY_SECRET !== undefined
        ? {
            kind: "secret",
            name: policySecretIsId
              ? `projects/${c.GOOGLE_CLOUD_PROJECT}/secrets/${c.KORRAL_POLICY_SECRET}/versions/latest`
              : c.KORRAL_POLICY_SECRET,
          }
        : undefined;
  return readConfig(VARIABLES, c, { policy: { source: policySource } });
}

/** What the start-up line and /healthz name as the StoreLink in use. */
export const EMBEDDED_STORELINK = "embedded demo";

/**
 * "embedded demo", or the StoreLink URL's host (and port) only: never its path, query or
 * userinfo, any of which could carry a credential.
 */
export function storelinkInUse(config: Pick<Config, "storelinkUrl">): string {
  if (config.storelinkUrl === undefined) return EMBEDDED_STORELINK;
  return new URL(config.storelinkUrl).host;
}
