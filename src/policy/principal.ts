import { hostname, userInfo } from "node:os";
/**
 * Who a call acts for: one string, its kind as a prefix, so two kinds can never name the same
 * caller. `user:<email>` a person's token, `svc:<email>` a service account, `client:<client_id>` a
 * client acting for no person (client credentials); on stdio `os:<login>@<host>` or
 * `local:<label>` (KORRAL_PRINCIPAL), both unverified: nothing checked them.
 *
 * Every id that leaves this module passed `principalProblem`, so it is printable ASCII with no
 * space, quote or backslash and at most PRINCIPAL_MAX_LENGTH characters: safe in an audit line's
 * `by=` field and as a policy key. E-mail addresses are lower-cased (IdPs differ in case; people
 * do not).
 */
import { LABEL, LABEL_RULE } from "../config/principal-label.js";

/** The label rule lives with the configuration, which refuses a bad KORRAL_PRINCIPAL at start. */
export { LABEL_RULE, labelProblem } from "../config/principal-label.js";

export const PRINCIPAL_KINDS = ["user", "svc", "client", "os", "local"] as const;
export type PrincipalKind = (typeof PRINCIPAL_KINDS)[number];

export interface Principal {
  /** `<kind>:<name>`, canonical (see canonicalPrincipalId). */
  readonly id: string;
  readonly kind: PrincipalKind;
  /** False when the caller named itself and nothing verified it (stdio). */
  readonly verified: boolean;
}

/** Longest principal id: the longest kind, `os:` with a 64-character login and a host name. */
export const PRINCIPAL_MAX_LENGTH = 3 + 64 + 1 + 253;

const EMAIL_LOCAL = /^[a-z0-9._%+-]{1,64}$/;
const DOMAIN_LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
/** An OAuth client_id: printable ASCII without space, quote or backslash (a CIMD URL fits). */
const CLIENT_ID = /^[!#-[\]-~]{1,255}$/;
const OS_LOGIN = /^[A-Za-z0-9._-]{1,64}$/;

/** What is wrong with `email` as a principal's address (already lower-cased), or undefined. */
function emailProblem(email: string): string | undefined {
  if (email.length > 254) return "an e-mail address of at most 254 characters";
  const at = email.lastIndexOf("@");
  const local = email.slice(0, at);
  const domain = email.slice(at + 1);
  if (at < 0 || !EMAIL_LOCAL.test(local) || !domainOk(domain)) {
    return "an e-mail address (letters, digits and . _ % + - before the @, a domain name after it)";
  }
  return undefined;
}

const domainOk = (domain: string): boolean =>
  domain.length >= 1 &&
  domain.length <= 253 &&
  domain.split(".").every((label) => DOMAIN_LABEL.test(label));

/** Why `body` cannot follow `<kind>:`, or undefined. `body` is canonical already. */
function bodyProblem(kind: PrincipalKind, body: string): string | undefined {
  switch (kind) {
    case "user":
    case "svc":
      return emailProblem(body);
    case "client":
      return CLIENT_ID.test(body)
        ? undefined
        : "a client id of 1 to 255 printable ASCII characters without spaces, quotes or backslashes";
    case "os": {
      const at = body.lastIndexOf("@");
      return at > 0 && OS_LOGIN.test(body.slice(0, at)) && domainOk(body.slice(at + 1))
        ? undefined
        : "<login>@<host> (login: letters, digits, . _ -; host: a host name)";
    }
    case "local":
      return LABEL.test(body) ? undefined : `a label of ${LABEL_RULE}`;
  }
}

const isKind = (value: string): value is PrincipalKind =>
  (PRINCIPAL_KINDS as readonly string[]).includes(value);

/**
 * The canonical form of a principal id (`user:`/`svc:` addresses and `os:` hosts lower-cased),
 * or a problem in words. The one check every principal id passes, from a token, a policy file
 * or the environment.
 */
export function canonicalPrincipalId(id: string): { id: string } | { problem: string } {
  if (id.length > PRINCIPAL_MAX_LENGTH) {
    return { problem: `a principal is at most ${PRINCIPAL_MAX_LENGTH} characters` };
  }
  const colon = id.indexOf(":");
  const kind = id.slice(0, colon);
  if (colon < 0 || !isKind(kind)) {
    return { problem: `a principal starts with ${PRINCIPAL_KINDS.map((k) => `${k}:`).join(", ")}` };
  }
  let body = id.slice(colon + 1);
  if (kind === "user" || kind === "svc") body = body.toLowerCase();
  if (kind === "os") {
    const at = body.lastIndexOf("@");
    body = `${body.slice(0, at + 1)}${body.slice(at + 1).toLowerCase()}`;
  }
  const problem = bodyProblem(kind, body);
  return problem === undefined
    ? { id: `${kind}:${body}` }
    : { problem: `${kind}: needs ${problem}` };
}

/** Why `id` is not a principal id, or undefined. */
export function principalProblem(id: string): string | undefined {
  const checked = canonicalPrincipalId(id);
  return "problem" in checked ? checked.problem : undefined;
}

class PrincipalError extends Error {
  override readonly name = "PrincipalError";
}

function make(kind: PrincipalKind, body: string, verified: boolean): Principal {
  const checked = canonicalPrincipalId(`${kind}:${body}`);
  // The message never quotes the value: it came from a token or the environment.
  if ("problem" in checked) throw new PrincipalError(`Not a principal: ${checked.problem}`);
  return { id: checked.id, kind, verified };
}

/** A person, from a verified token's e-mail claim. Throws PrincipalError for a bad address. */
export const userPrincipal = (email: string): Principal => make("user", email, true);
/** A service account, from a verified Google ID token. */
export const svcPrincipal = (email: string): Principal => make("svc", email, true);
/** Google's service accounts, whatever their project: their e-mail domain. */
const SERVICE_ACCOUNT_DOMAIN = /\.gserviceaccount\.com$/i;

/**
 * The one rule for a verified token's e-mail: a Google service account's address is `svc:`,
 * anyone else's `user:`. Throws PrincipalError for a bad address.
 */
export const emailPrincipal = (email: string): Principal =>
  SERVICE_ACCOUNT_DOMAIN.test(email) ? svcPrincipal(email) : userPrincipal(email);
/** A client acting for no person (client credentials), from a verified token's client_id. */
export const clientPrincipal = (clientId: string): Principal => make("client", clientId, true);
/** A label the stdio user set (KORRAL_PRINCIPAL); unverified. */
export const localPrincipal = (label: string): Principal => make("local", label, false);

/** Characters an OS login or host may not carry into a principal become `_` (in a host `-`). */
const cleanLogin = (login: string): string =>
  login.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 64) || "unknown";
function cleanHost(host: string): string {
  let clean = "";
  for (const raw of host.toLowerCase().split(".")) {
    const label = raw
      .replace(/[^a-z0-9-]/g, "-")
      .slice(0, 63)
      .replace(/^-+|-+$/g, "");
    if (label === "") continue;
    const next = clean === "" ? label : `${clean}.${label}`;
    if (next.length > 253) break;
    clean = next;
  }
  return clean || "unknown";
}

/**
 * The OS account stdio runs as, unverified. Any login or host name is accepted: characters a
 * principal cannot carry are replaced, so the account always yields a principal.
 */
export function osPrincipal(login: string, host: string): Principal {
  return make("os", `${cleanLogin(login)}@${cleanHost(host)}`, false);
}

/**
 * The principal of a stdio process: `local:<label>` when KORRAL_PRINCIPAL gave a label (checked
 * by config.ts), else the OS account `os:<login>@<host>`. Unverified either way.
 */
export function stdioPrincipal(
  label: string | undefined,
  account: { login: string; host: string },
): Principal {
  return label === undefined ? osPrincipal(account.login, account.host) : localPrincipal(label);
}

/** This process's OS account; a login the system cannot name (no passwd entry) reads `uid-<n>`. */
function processAccount(): { login: string; host: string } {
  let login: string;
  try {
    login = userInfo().username;
  } catch {
    login = `uid-${process.getuid?.() ?? "unknown"}`;
  }
  return { login, host: hostname() };
}

/**
 * Who an unauthenticated transport acts for: stdio, and HTTP with KORRAL_AUTH=none (loopback
 * only). `local:<KORRAL_PRINCIPAL>`, else the account the server runs as. Unverified.
 */
export const unverifiedPrincipal = (label: string | undefined): Principal =>
  stdioPrincipal(label, processAccount());
