import { isLoopbackHost } from "./host-patterns.js";

/**
 * HTTP authentication's settings (KORRAL_AUTH and its variables, declared in config.ts): their
 * value rules and the checks across variables. The resource server itself is src/http/auth/.
 */

export type AuthKind = "google" | "oauth";

export const AUTH_VALUES = 'must be "oauth", "google", "oauth,google" or "none"';

/** KORRAL_AUTH's value: the kinds, sorted; `none` is the empty list. */
export function authKinds(value: string): AuthKind[] | undefined {
  const kinds = [...new Set(value.split(",").map((kind) => kind.trim()))].sort();
  if (kinds.join() === "none") return [];
  return kinds.every((kind) => kind === "oauth" || kind === "google")
    ? (kinds as AuthKind[])
    : undefined;
}

/** RFC 6749's scope-token: printable ASCII without space, `"` or `\`. */
export const SCOPE_TOKEN = /^[\u0021\u0023-\u005B\u005D-\u007E]+$/;
export const SCOPE_MESSAGE = "must be one OAuth scope (printable ASCII, no space)";

/** A token claim's name; `/` and `:` for the URL-namespaced claims some IdPs require. */
export const CLAIM_NAME = /^[A-Za-z0-9_.:/-]{1,128}$/;
export const CLAIM_MESSAGE = "must be a claim name (letters, digits, _ . : / -)";

/** Where Google publishes the keys that sign its ID tokens. */
export const GOOGLE_CERTS_URL = "https://www.googleapis.com/oauth2/v3/certs";

const LOOPBACK_NAMES = new Set(["localhost", "127.0.0.1", "[::1]"]);

/** An http(s) URL whose host is a loopback name (the only place plain http is accepted). */
export function isLoopbackUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return (
      (url.protocol === "http:" || url.protocol === "https:") && LOOPBACK_NAMES.has(url.hostname)
    );
  } catch {
    return false;
  }
}

/**
 * Why `value` cannot be the issuer or the resource, or undefined: an absolute https URL (http on
 * loopback only, for tests and local runs), without a fragment or credentials, and for an issuer
 * without a query (RFC 8414 §2; RFC 8707 §2 forbids the resource's fragment).
 */
export function authUrlProblem(value: string, what: "issuer" | "resource"): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return "must be an absolute https:// URL";
  }
  if (url.protocol !== "https:" && !(url.protocol === "http:" && isLoopbackUrl(value))) {
    return "must be an https:// URL (http:// only on loopback)";
  }
  if (url.hash !== "" || value.includes("#")) return "must have no #fragment";
  if (what === "issuer" && url.search !== "") return "must have no ?query";
  if (url.username !== "" || url.password !== "") return "must have no user or password";
  return undefined;
}

/** The settings as validated, by variable name. */
export interface AuthVariables {
  KORRAL_AUTH?: readonly AuthKind[] | undefined;
  KORRAL_OAUTH_ISSUER?: string | undefined;
  KORRAL_OAUTH_RESOURCE?: string | undefined;
  KORRAL_OAUTH_READ_SCOPE: string;
  KORRAL_OAUTH_ORDER_SCOPE: string;
  KORRAL_GOOGLE_AUDIENCES: readonly string[];
  KORRAL_POLICY_FILE?: string | undefined;
  KORRAL_POLICY_SECRET?: string | undefined;
}

/** What the resource server reads (`Config["auth"]`). */
export interface AuthSettings {
  /** Empty: `none`, the unverified caller. */
  readonly kinds: readonly AuthKind[];
  readonly issuer: string;
  readonly resource: string;
  readonly audiences: readonly string[];
  readonly readScope: string;
  readonly orderScope: string;
  readonly principalClaim: string;
  /** The access-token claim listing the caller's IdP groups (oauth); undefined: none is read. */
  readonly groupsClaim: string | undefined;
  readonly googleAudiences: readonly string[];
  readonly googleCertsUrl: string;
}

/**
 * The checks across variables, one line each (config.ts joins them with the rest). `invalid`
 * says whether a variable was already named as invalid (no second line about it). Only the HTTP
 * entry authenticates: stdio keeps none, as the specification says.
 */
export function authProblems(
  c: AuthVariables,
  context: { host: string; production: boolean; http: boolean },
  invalid: (name: keyof AuthVariables) => boolean,
): string[] {
  const problems: string[] = [];
  if (!context.http) return problems;
  const kinds = c.KORRAL_AUTH;
  /** Set (a list: not empty), or already named as invalid. */
  const given = (
    name:
      | "KORRAL_OAUTH_ISSUER"
      | "KORRAL_OAUTH_RESOURCE"
      | "KORRAL_GOOGLE_AUDIENCES"
      | "KORRAL_POLICY_FILE"
      | "KORRAL_POLICY_SECRET",
  ) => {
    const value = c[name];
    return invalid(name) || typeof value === "string" || (value !== undefined && value.length > 0);
  };
  if (kinds === undefined && !invalid("KORRAL_AUTH")) {
    if (context.production) {
      problems.push(
        "KORRAL_AUTH: required on HTTP when NODE_ENV=production: oauth, google or oauth,google (none is refused)",
      );
    } else if (!isLoopbackHost(context.host)) {
      problems.push(
        `KORRAL_AUTH: required when HOST is not loopback (HOST=${context.host}): oauth, google, oauth,google, or none to accept every caller unverified`,
      );
    }
  }
  if (kinds !== undefined && kinds.length === 0 && context.production) {
    problems.push(
      "KORRAL_AUTH: none is refused when NODE_ENV=production; set oauth, google or oauth,google",
    );
  }
  if (kinds?.includes("oauth")) {
    for (const name of ["KORRAL_OAUTH_ISSUER", "KORRAL_OAUTH_RESOURCE"] as const) {
      if (!given(name)) problems.push(`${name}: required when KORRAL_AUTH includes oauth`);
    }
    if (c.KORRAL_OAUTH_READ_SCOPE === c.KORRAL_OAUTH_ORDER_SCOPE) {
      problems.push("KORRAL_OAUTH_ORDER_SCOPE: must differ from KORRAL_OAUTH_READ_SCOPE");
    }
  }
  // A verified caller is scoped to its stores: without a policy every one of them could act at
  // every store the service holds a key for.
  if (
    kinds !== undefined &&
    kinds.length > 0 &&
    !given("KORRAL_POLICY_FILE") &&
    !given("KORRAL_POLICY_SECRET")
  ) {
    problems.push(
      "KORRAL_POLICY_FILE or KORRAL_POLICY_SECRET: required when KORRAL_AUTH is not none; the store policy says which stores each caller may read and order for (docs/identity.md)",
    );
  }
  if (kinds?.includes("google") && !given("KORRAL_GOOGLE_AUDIENCES")) {
    problems.push(
      "KORRAL_GOOGLE_AUDIENCES: required when KORRAL_AUTH includes google (the service's URLs)",
    );
  }
  return problems;
}
