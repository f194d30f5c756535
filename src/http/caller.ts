import type { IncomingMessage } from "node:http";

/**
 * Who is calling with KORRAL_AUTH=none, for the per-caller rate limit only (never for
 * authorisation); with authentication on, the verified principal takes its place (http/auth/).
 *
 * Deployed with `--no-allow-unauthenticated`, Cloud Run has already verified the Google-signed ID
 * token in `Authorization: Bearer …` before the request reaches this process, and rejects requests
 * without a valid one. Reading the payload's `email` (else `sub`) WITHOUT re-verifying the
 * signature is acceptable only because of that: anywhere else an unverified token is just a
 * caller-chosen string, which is why the result keys a rate limit and nothing more. Without a
 * readable token the client address is used.
 */
export function callerOf(req: IncomingMessage): string {
  const identity = tokenIdentity(req.headers.authorization);
  if (identity) return `id:${identity}`;
  return `ip:${req.socket.remoteAddress ?? "unknown"}`;
}

function tokenIdentity(authorization: string | undefined): string | undefined {
  if (!authorization?.startsWith("Bearer ")) return undefined;
  const payload = authorization.slice(7).split(".")[1];
  if (!payload) return undefined;
  try {
    const claims = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as unknown;
    if (claims === null || typeof claims !== "object") return undefined;
    const { email, sub } = claims as { email?: unknown; sub?: unknown };
    if (typeof email === "string" && email !== "") return email;
    if (typeof sub === "string" && sub !== "") return sub;
  } catch {
    // Not a JWT: fall back to the address.
  }
  return undefined;
}
