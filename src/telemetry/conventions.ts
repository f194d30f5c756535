/**
 * Every attribute and metric name this server's telemetry uses, pinned here (the MCP semantic
 * conventions are still marked Development): test/telemetry/conventions.test.ts holds them.
 * `mcp.session.id` is not used. Values never carry a tool's arguments, a reason, a key or a token.
 */
export const ATTR = {
  methodName: "mcp.method.name",
  toolName: "gen_ai.tool.name",
  operationName: "gen_ai.operation.name",
  jsonrpcId: "jsonrpc.request.id",
  protocolVersion: "mcp.protocol.version",
  transport: "network.transport",
  errorType: "error.type",
  requestId: "korral.request_id",
  storeId: "korral.store_id",
  auditOutcome: "korral.audit.outcome",
  idempotencyKey: "korral.idempotency_key",
  /** Set at a request span's start: a write is always sampled (telemetry/spans.ts). */
  write: "korral.write",
  httpMethod: "http.request.method",
  urlTemplate: "url.template",
  httpStatus: "http.response.status_code",
  serverAddress: "server.address",
  serverPort: "server.port",
  /** A limits-store CLIENT span: the store and what was asked (`take slot`, `rate limit`). */
  dbSystem: "db.system.name",
  dbOperation: "db.operation.name",
} as const;

/** `gen_ai.operation.name` of a tool call. */
export const OPERATION_EXECUTE_TOOL = "execute_tool";

/** `network.transport`: Streamable HTTP runs on TCP, stdio on a pipe. */
export const TRANSPORT = { http: "tcp", stdio: "pipe" } as const;

/** Metric names (units in telemetry/otel.ts's instruments). */
export const METRICS = {
  /** Histogram, seconds, per MCP request (sampled or not). */
  serverOperationDuration: "mcp.server.operation.duration",
  /** Histogram, seconds, per StoreLink request: by route and outcome. */
  storelinkRequestDuration: "korral.storelink.request.duration",
  /** Gauge: 1 while the limits store answers, 0 while it is down. */
  limitsAvailable: "korral.limits.available",
} as const;

/** The span attributes each duration metric keeps: a bounded set, never an id or a store. */
export const SERVER_METRIC_ATTRIBUTES: readonly string[] = [
  ATTR.methodName,
  ATTR.toolName,
  ATTR.errorType,
  ATTR.protocolVersion,
  ATTR.transport,
];
export const STORELINK_METRIC_ATTRIBUTES: readonly string[] = [
  ATTR.urlTemplate,
  ATTR.httpMethod,
  ATTR.httpStatus,
  ATTR.errorType,
];

/** The MCP conventions' bucket boundaries for durations (seconds), used by both histograms. */
export const DURATION_BUCKETS: readonly number[] = [
  0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300,
];
