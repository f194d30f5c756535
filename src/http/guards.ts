import type { ServerResponse } from "node:http";
import type { NextFunction, Request, Response } from "express";
import { hostAllowedBy, hostnameOf, LOOPBACK_HOSTS } from "./host-patterns.js";
import { endWithJson } from "./json-answer.js";

/**
 * Writes a JSON-RPC error body (the only kind of error body this service sends), on node's
 * response as on Express's: the bytes and headers Express's `res.json` sent.
 */
export function rpcError(res: ServerResponse, status: number, code: number, message: string): void {
  if (res.headersSent) return;
  const body = JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null });
  endWithJson(res, status, body, "application/json; charset=utf-8");
}

/**
 * DNS-rebinding protection: the Host header must name this service. Cloud Run reaches the
 * container by its own host names (`*.run.app`, tagged revisions, a custom domain), so those are
 * configured, exactly or as a pattern (see `hostPatternProblem`).
 */
export function hostGuard(allowedHosts: readonly string[]) {
  const isAllowed = hostCheck(allowedHosts);
  return (req: Request, res: Response, next: NextFunction): void => {
    if (!isAllowed(req.headers.host)) {
      rpcError(res, 403, -32000, "Forbidden: Host not allowed.");
      return;
    }
    next();
  };
}

/** Whether a Host header names this service (hostGuard's rule; the direct way in asks it too). */
export function hostCheck(allowedHosts: readonly string[]): (host: string | undefined) => boolean {
  const allowed = hostAllowedBy(allowedHosts);
  // Verdicts by raw header: clients send the same Host every time, so it is parsed as a URL once.
  // Bounded, so varied junk cannot grow it.
  const verdicts = new Map<string, boolean>();
  return (header) => {
    if (header === undefined) return false;
    let verdict = verdicts.get(header);
    if (verdict === undefined) {
      verdict = allowed(header);
      if (verdicts.size >= 256) verdicts.clear();
      verdicts.set(header, verdict);
    }
    return verdict;
  };
}

/**
 * The MCP transport spec requires validating Origin. Non-browser clients send none and are
 * accepted; a browser page must come from a configured origin or from a localhost page.
 */
export function originGuard(allowedOrigins: readonly string[]) {
  const isAllowed = originCheck(allowedOrigins);
  return (req: Request, res: Response, next: NextFunction): void => {
    if (isAllowed(req.headers.origin)) {
      next();
      return;
    }
    rpcError(res, 403, -32000, "Forbidden: Origin not allowed.");
  };
}

/** Whether an Origin header (or none) is accepted (originGuard's rule; the direct way asks it). */
export function originCheck(
  allowedOrigins: readonly string[],
): (origin: string | undefined) => boolean {
  const allowed = new Set(allowedOrigins.map((o) => o.toLowerCase().replace(/\/+$/, "")));
  return (origin) => {
    if (origin === undefined) return true;
    const normalised = origin.toLowerCase();
    const hostname = hostnameOf(normalised);
    const isHttp = normalised.startsWith("http://") || normalised.startsWith("https://");
    return (
      allowed.has(normalised) ||
      (isHttp && hostname !== undefined && LOOPBACK_HOSTS.includes(hostname))
    );
  };
}
