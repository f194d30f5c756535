import { OAuthError, OAuthErrorCode } from "@modelcontextprotocol/server";
import {
  createRemoteJWKSet,
  decodeJwt,
  errors,
  type JWTPayload,
  type JWTVerifyGetKey,
  jwtVerify,
} from "jose";
import type { AuthKind, AuthSettings } from "../../config/auth.js";
import { opsLog } from "../../logging/ops.js";
import { clientPrincipal, emailPrincipal } from "../../policy/principal.js";

/**
 * Checks a bearer token with `jose` and says who it names. Nothing here keeps, logs or repeats
 * the token or its claims: a refusal names jose's error code only.
 *
 * - `oauth`: a JWT access token (RFC 9068, `typ: at+jwt`) of KORRAL_OAUTH_ISSUER, checked against
 *   the keys its metadata (RFC 8414, else OpenID discovery) points to; `aud` the resource (RFC
 *   8707) or a configured extra audience;
 * - `google`: a Google ID token, checked against Google's keys; `aud` one of the service's URLs,
 *   a verified e-mail.
 * Both: a signature by an asymmetric algorithm of the allow-list (never `none`, never HMAC), and
 * an `exp` in the future.
 */

/** Who a verified token names, and what it may do. */
export interface Verified {
  kind: AuthKind;
  /** `user:<email>`, `svc:<email>` or `client:<client_id>` (policy/principal.ts). */
  principal: string;
  /** The OAuth client the token was issued to, where the token names one. */
  clientId: string | undefined;
  scopes: readonly string[];
  /** The IdP groups the token lists (KORRAL_OAUTH_GROUPS_CLAIM), for the store policy. */
  groups: readonly string[];
  /** Seconds since the epoch. */
  expiresAt: number;
}

/** The issuer's metadata or keys cannot be read now: the caller should retry (503). */
export class AuthUnavailable extends Error {
  override readonly name = "AuthUnavailable";
}

/** Asymmetric JWS algorithms only: `none` and the HMAC family can never verify a token. */
export const ALGORITHMS = [
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
  "ES256",
  "ES384",
  "ES512",
  "EdDSA",
];

const GOOGLE_ISSUERS = ["https://accounts.google.com", "accounts.google.com"];
/** Leeway for clocks that disagree a little (seconds). */
const CLOCK_TOLERANCE = 5;
const FETCH_TIMEOUT_MS = 5_000;
/** After a failed discovery, requests are refused at once for this long before the next try. */
const RETRY_AFTER_MS = 5_000;

const invalidToken = (why: string) => new OAuthError(OAuthErrorCode.InvalidToken, why);

const str = (value: unknown): string | undefined =>
  typeof value === "string" && value !== "" ? value : undefined;

/** The principal id, or undefined when the value cannot be one (the token is then refused). */
function principalId(make: (value: string) => { id: string }, value: string): string | undefined {
  try {
    return make(value).id;
  } catch {
    return undefined;
  }
}

/** Both claims IdPs use: `scope` (a space-separated string) and `scp` (a list, or a string). */
export function scopesOf(payload: JWTPayload): string[] {
  const found = new Set<string>();
  for (const claim of [payload.scope, payload.scp]) {
    const items = typeof claim === "string" ? claim.split(" ") : Array.isArray(claim) ? claim : [];
    for (const item of items) if (typeof item === "string" && item !== "") found.add(item);
  }
  return [...found];
}

/** Groups kept from one token, and the longest name kept (the policy's idp_groups rule). */
const MAX_GROUPS = 1_000;
const MAX_GROUP_LENGTH = 128;

/**
 * The groups `claim` lists: a list of names, or one name; anything but a name of 1 to 128
 * characters is dropped. No claim configured: none.
 */
export function groupsOf(payload: JWTPayload, claim: string | undefined): string[] {
  if (claim === undefined) return [];
  const value = payload[claim];
  const items = typeof value === "string" ? [value] : Array.isArray(value) ? value : [];
  const names = items.filter(
    (item): item is string =>
      typeof item === "string" && item !== "" && item.length <= MAX_GROUP_LENGTH,
  );
  return [...new Set(names)].slice(0, MAX_GROUPS);
}

/** RFC 8414 §3's well-known URL (inserted before the issuer's path), then OpenID's (appended). */
export function metadataUrls(issuer: string): string[] {
  const url = new URL(issuer);
  const path = url.pathname === "/" ? "" : url.pathname.replace(/\/$/, "");
  return [
    `${url.origin}/.well-known/oauth-authorization-server${path}`,
    `${url.origin}${path}/.well-known/openid-configuration`,
  ];
}

/**
 * The issuer's signing keys, found through its metadata once and kept (jose refreshes the key
 * set itself when a token names an unknown key). A failed discovery is tried again on a later
 * request, no sooner than RETRY_AFTER_MS.
 */
function discoveredKeys(issuer: string): () => Promise<JWTVerifyGetKey> {
  let keys: Promise<JWTVerifyGetKey> | undefined;
  let failedAt = Number.NEGATIVE_INFINITY;
  const discover = async (): Promise<JWTVerifyGetKey> => {
    for (const url of metadataUrls(issuer)) {
      let response: Response;
      try {
        response = await fetch(url, {
          signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
          redirect: "error",
          headers: { accept: "application/json" },
        });
      } catch {
        continue;
      }
      if (!response.ok) continue;
      const metadata = (await response.json().catch(() => undefined)) as
        | { issuer?: unknown; jwks_uri?: unknown }
        | undefined;
      // RFC 8414 §3.3: the document must name exactly the issuer it was fetched for.
      if (metadata?.issuer !== issuer || typeof metadata.jwks_uri !== "string") continue;
      return createRemoteJWKSet(new URL(metadata.jwks_uri), {
        timeoutDuration: FETCH_TIMEOUT_MS,
        cooldownDuration: 30_000,
      });
    }
    throw new AuthUnavailable("the authorization server's metadata could not be read");
  };
  return () => {
    if (keys !== undefined) return keys;
    if (Date.now() - failedAt < RETRY_AFTER_MS) {
      return Promise.reject(
        new AuthUnavailable("the authorization server's metadata could not be read"),
      );
    }
    keys = discover().catch((error: unknown) => {
      keys = undefined;
      failedAt = Date.now();
      opsLog.warn(
        { issuer: new URL(issuer).host },
        "OAuth: the authorization server's metadata could not be read; tokens are refused with 503 until it can",
      );
      throw error;
    });
    return keys;
  };
}

/** A jose failure: the token's fault (401), or the key set's (503). */
function refusal(error: unknown): Error {
  if (error instanceof AuthUnavailable || error instanceof OAuthError) return error;
  if (error instanceof errors.JOSEError) {
    if (error.code === "ERR_JWKS_TIMEOUT" || error.code === "ERR_JWKS_INVALID") {
      return new AuthUnavailable("the signing keys could not be read");
    }
    return invalidToken(`token rejected (${error.code})`);
  }
  // A network failure fetching the key set (jose lets fetch's own error through).
  return new AuthUnavailable("the signing keys could not be read");
}

type TokenCheck = (token: string) => Promise<Verified>;

export interface TokenVerifier {
  verify: TokenCheck;
  /** Reads the issuer's metadata now (oauth), so the first call does not wait for it. */
  warm(): void;
}

function oauthVerifier(settings: AuthSettings): TokenVerifier {
  const keys = discoveredKeys(settings.issuer);
  const audience = [settings.resource, ...settings.audiences];
  const verify: TokenCheck = async (token) => {
    const getKey = await keys();
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, getKey, {
        issuer: settings.issuer,
        audience,
        typ: "at+jwt",
        algorithms: ALGORITHMS,
        requiredClaims: ["exp"],
        clockTolerance: CLOCK_TOLERANCE,
      }));
    } catch (error) {
      throw refusal(error);
    }
    const clientId = str(payload.client_id) ?? str(payload.azp);
    const person = str(payload[settings.principalClaim]);
    // A person's token names them in the configured claim; a client's own token (client
    // credentials) has `sub` = its client id (RFC 9068 §2.2) and names no person.
    const principal =
      person !== undefined
        ? principalId(emailPrincipal, person)
        : clientId !== undefined && (payload.sub === undefined || payload.sub === clientId)
          ? principalId(clientPrincipal, clientId)
          : undefined;
    if (principal === undefined) {
      throw invalidToken(`token names no ${settings.principalClaim} and no client of its own`);
    }
    return {
      kind: "oauth",
      principal,
      clientId,
      scopes: scopesOf(payload),
      groups: groupsOf(payload, settings.groupsClaim),
      expiresAt: payload.exp as number,
    };
  };
  return { verify, warm: () => void keys().catch(() => {}) };
}

function googleVerifier(settings: AuthSettings): TokenCheck {
  const scopes = [settings.readScope, settings.orderScope];
  // Made at the first token, not at start: building it loads node's fetch (tens of
  // milliseconds of a cold start), and that first token fetches Google's keys anyway.
  let keys: ReturnType<typeof createRemoteJWKSet> | undefined;
  const keySet = () =>
    (keys ??= createRemoteJWKSet(new URL(settings.googleCertsUrl), {
      timeoutDuration: FETCH_TIMEOUT_MS,
      cooldownDuration: 30_000,
    }));
  return async (token) => {
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, keySet(), {
        issuer: GOOGLE_ISSUERS,
        audience: [...settings.googleAudiences],
        algorithms: ["RS256"],
        requiredClaims: ["exp"],
        clockTolerance: CLOCK_TOLERANCE,
      }));
    } catch (error) {
      throw refusal(error);
    }
    const email = str(payload.email);
    // Anyone can mint a Google token for their own account: only a verified address names them.
    if (email === undefined || payload.email_verified !== true) {
      throw invalidToken("token names no verified email");
    }
    const principal = principalId(emailPrincipal, email);
    if (principal === undefined) throw invalidToken("token names no usable email");
    // Google ID tokens carry no scopes: what a Google principal may do is the store policy's.
    return {
      kind: "google",
      principal,
      clientId: undefined,
      scopes,
      groups: [],
      expiresAt: payload.exp as number,
    };
  };
}

/** One verifier for the configured kinds; with both, a token's `iss` says which checks it. */
export function tokenVerifier(settings: AuthSettings): TokenVerifier {
  const oauth = settings.kinds.includes("oauth") ? oauthVerifier(settings) : undefined;
  const google = settings.kinds.includes("google") ? googleVerifier(settings) : undefined;
  const verify: TokenCheck = async (token) => {
    let issuer: string | undefined;
    try {
      issuer = decodeJwt(token).iss;
    } catch {
      throw invalidToken("token rejected (not a JWT)");
    }
    if (google !== undefined && issuer !== undefined && GOOGLE_ISSUERS.includes(issuer)) {
      return google(token);
    }
    if (oauth !== undefined) return oauth.verify(token);
    if (google !== undefined) return google(token);
    throw invalidToken("token rejected");
  };
  return { verify, warm: () => oauth?.warm() };
}
