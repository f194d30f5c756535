/** Cloud Logging's special fields that tie a log line to a Cloud Trace trace. */
export type TraceFields = Partial<{
  "logging.googleapis.com/trace": string;
  "logging.googleapis.com/spanId": string;
  "logging.googleapis.com/trace_sampled": boolean;
}>;

let traceProject: string | undefined;

/** Sets the project id trace fields are built with (from GOOGLE_CLOUD_PROJECT). */
export function setTraceProject(projectId: string | undefined): void {
  traceProject = projectId;
}

/**
 * The trace fields of one HTTP request, passed explicitly to whatever logs on its behalf, never
 * through AsyncLocalStorage (its promise hooks tax every request; docs/performance.md).
 */
export function traceFieldsOf(headers: Record<string, string | string[] | undefined>): TraceFields {
  return traceFieldsFromHeaders(headers, traceProject);
}

const TRACEPARENT = /^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const CLOUD_TRACE = /^([0-9a-fA-F]{32})(?:\/(\d{1,20}))?(?:;o=([01]))?$/;

const header = (value: string | string[] | undefined): string | undefined =>
  (Array.isArray(value) ? value[0] : value)?.trim();

/**
 * Builds the trace fields from W3C `traceparent` (preferred) or `X-Cloud-Trace-Context`
 * (`TRACE_ID/SPAN_ID;o=1`, span id in decimal). Without a project id there is nothing to build:
 * Cloud Logging needs `projects/<id>/traces/<trace>`. Malformed headers are ignored.
 */
export function traceFieldsFromHeaders(
  headers: Record<string, string | string[] | undefined>,
  projectId: string | undefined,
): TraceFields {
  if (!projectId) return {};
  const traceparent = header(headers.traceparent)?.toLowerCase();
  const w3c = traceparent ? TRACEPARENT.exec(traceparent) : null;
  if (w3c?.[1] && w3c[2] && w3c[3] && !/^0+$/.test(w3c[1])) {
    return {
      "logging.googleapis.com/trace": `projects/${projectId}/traces/${w3c[1]}`,
      "logging.googleapis.com/spanId": w3c[2],
      "logging.googleapis.com/trace_sampled": (Number.parseInt(w3c[3], 16) & 1) === 1,
    };
  }
  const cloud = header(headers["x-cloud-trace-context"]);
  const match = cloud ? CLOUD_TRACE.exec(cloud) : null;
  if (!match?.[1]) return {};
  const fields: TraceFields = {
    "logging.googleapis.com/trace": `projects/${projectId}/traces/${match[1].toLowerCase()}`,
  };
  if (match[2]) {
    const span = BigInt(match[2]);
    if (span > 0n && span < 2n ** 64n) {
      fields["logging.googleapis.com/spanId"] = span.toString(16).padStart(16, "0");
    }
  }
  if (match[3]) fields["logging.googleapis.com/trace_sampled"] = match[3] === "1";
  return fields;
}

/**
 * The trace fields of this server's own span (telemetry on): the log lines of a call point at
 * its SERVER span. Undefined without a project id (Cloud Logging needs one) or without ids; the
 * ids are asked for only with a project, as an unsampled span makes its span id when asked.
 */
export function traceFieldsOfSpan(span: {
  readonly ids: { traceId: string; spanId: string; sampled: boolean } | undefined;
}): TraceFields | undefined {
  if (!traceProject) return undefined;
  const ids = span.ids;
  if (ids === undefined) return undefined;
  return {
    "logging.googleapis.com/trace": `projects/${traceProject}/traces/${ids.traceId}`,
    "logging.googleapis.com/spanId": ids.spanId,
    "logging.googleapis.com/trace_sampled": ids.sampled,
  };
}
