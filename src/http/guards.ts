import type { NextFunction, Request, Response } from "express";
import { hostAllowedBy, hostnameOf, LOOPBACK_HOSTS } from "./host-patterns.js";

/** Writes a JSON-RPC error body (the only kind of error body this service sends). */
export function rpcError(res: Response, status: number, code: number, message: string): void {
  if (res.headersSent) return;
  res.status(status).json({ jsonrpc: "2.0", error: { code, message }, id: null });
}

/**
 * DNS-rebinding protection: the Host header must name this service. Cloud Run reaches the
 * container by its own host names (`*.run.app`, tagged revisions, a custom domain), so those are
 * configured, exactly or as a pattern (see `hostPatternProblem`).
 */
export function hostGuard(allowedHosts: readonly string[]) {
  const allowed = hostAllowedBy(allowedHosts);
  // Verdicts by raw header: clients send the same Host every time, so it is parsed as a URL once.
  // Bounded, so varied junk cannot grow it.
  const verdicts = new Map<string, boolean>();
  const isAllowed = (header: string): boolean => {
    let verdict = verdicts.get(header);
    if (verdict === undefined) {
      verdict = allowed(header);
      if (verdicts.size >= 256) verdicts.clear();
      verdicts.set(header, verdict);
    }
    return verdict;
  };
  return (req: Request, res: Response, next: NextFunction): void => {
    const header = req.headers.host;
    if (header === undefined || !isAllowed(header)) {
      rpcError(res, 403, -32000, "Forbidden: Host not allowed.");
      return;
    }
    next();
  };
}

/**
 * The MCP transport spec requires validating Origin. Non-browser clients send none and are
 * accepted; a browser page must come from a configured origin or from a localhost page.
 */
export function originGuard(allowedOrigins: readonly string[]) {
  const allowed = new Set(allowedOrigins.map((o) => o.toLowerCase().replace(/\/+$/, "")));
  return (req: Request, res: Response, next: NextFunction): void => {
    const origin = req.headers.origin;
    if (origin === undefined) {
      next();
      return;
    }
    const normalised = origin.toLowerCase();
    const hostname = hostnameOf(normalised);
    const isHttp = normalised.startsWith("http://") || normalised.startsWith("https://");
    if (
      allowed.has(normalised) ||
      (isHttp && hostname !== undefined && LOOPBACK_HOSTS.includes(hostname))
    ) {
      next();
      return;
    }
    rpcError(res, 403, -32000, "Forbidden: Origin not allowed.");
  };
}
