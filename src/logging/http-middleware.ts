import type { NextFunction, Request, Response } from "express";
import { opsLog } from "./ops.js";
import { runWithTraceFields, traceFieldsFromHeaders } from "./trace-context.js";

let traceProject: string | undefined;

/** Sets the project id trace fields are built with (from GOOGLE_CLOUD_PROJECT). */
export function setTraceProject(projectId: string | undefined): void {
  traceProject = projectId;
}

/**
 * Express middleware, mounted first: runs the request inside its Cloud Trace context (so ops,
 * trace and audit lines of this request carry `logging.googleapis.com/trace`) and writes one
 * access line at debug level when the response is done.
 */
export function requestLogging(req: Request, res: Response, next: NextFunction): void {
  const fields = traceFieldsFromHeaders(req.headers, traceProject);
  const started = performance.now();
  res.once("finish", () => {
    if (!opsLog.isLevelEnabled("debug")) return;
    opsLog.debug(
      {
        ...fields,
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
  runWithTraceFields(fields, next);
}
