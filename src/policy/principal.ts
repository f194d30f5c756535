/**
 * Who a call is on behalf of: one string, `<kind>:<value>`, the kind a prefix so that kinds can
 * never collide (`client:alice@x` is a client whose id looks like an e-mail, never the person).
 *
 * - `user:<email>`: a person (a delegated OAuth token, a person's Google ID token);
 * - `svc:<email>`: a Google service account (`…gserviceaccount.com`);
 * - `client:<client_id>`: an OAuth client acting for itself (client credentials, no person);
 * - `os:<login>@<host>`, `local:<label>`: stdio, unverified.
 *
 * The value is one log token: e-mails are lower-cased (IdPs match them case-insensitively) and
 * every character outside printable ASCII, a space or `%` is percent-encoded, so a principal can
 * neither split an audit line nor impersonate another by its spelling. Pure: no I/O, no state.
 */
export type PrincipalKind = "user" | "svc" | "client" | "os" | "local";

export type Principal = `${PrincipalKind}:${string}`;

/** Google's service accounts, whatever project: their e-mail domain. */
const SERVICE_ACCOUNT = /\.gserviceaccount\.com$/;

const encodeValue = (value: string): string =>
  Array.from(value, (char) => {
    const code = char.codePointAt(0) ?? 0;
    if (code > 0x20 && code < 0x7f && char !== "%") return char;
    return Array.from(
      Buffer.from(char, "utf8"),
      (byte) => `%${byte.toString(16).toUpperCase().padStart(2, "0")}`,
    ).join("");
  }).join("");

/** `<kind>:<value>`, or undefined for an empty value (no principal is better than a blank one). */
export function principal(kind: PrincipalKind, value: string): Principal | undefined {
  if (value === "") return undefined;
  return `${kind}:${encodeValue(value)}`;
}

/** A person or a Google service account, told apart by the e-mail's domain. */
export function principalOfEmail(email: string): Principal | undefined {
  const lower = email.trim().toLowerCase();
  return principal(SERVICE_ACCOUNT.test(lower) ? "svc" : "user", lower);
}

/** An OAuth client acting on its own behalf. */
export const clientPrincipal = (clientId: string): Principal | undefined =>
  principal("client", clientId);

export const kindOf = (p: Principal): PrincipalKind => p.slice(0, p.indexOf(":")) as PrincipalKind;
