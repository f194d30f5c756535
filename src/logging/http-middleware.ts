import type { NextFunction, Request, Response } from "express";
import { opsLog } from "./ops.js";
import { traceFieldsOf } from "./trace-context.js";

/**
 * Express middleware, mounted first: one access line at debug level, with the request's Cloud
 * Trace fields, when the response is done. (Tool calls carry their own trace fields: server.ts.)
 */
export function requestLogging(req: Request, res: Response, next: NextFunction): void {
  const started = performance.now();
  res.once("finish", () => {
    if (!opsLog.isLevelEnabled("debug")) return;
    opsLog.debug(
      {
        ...traceFieldsOf(req.headers),
        httpRequest: {
          requestMethod: req.method,
          requestUrl: req.originalUrl,
          status: res.statusCode,
          latency: `${((performance.now() - started) / 1000).toFixed(6)}s`,
          userAgent: req.get("user-agent"),
          remoteIp: req.ip,
          responseSize: res.get("content-length"),
        },
      },
      "http request",
    );
  });
  next();
}
