/**
 * Every attribute and metric name this server's telemetry uses, pinned here (the MCP semantic
 * conventions are still marked Development): test/telemetry/conventions.test.ts holds them.
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
  httpMethod: "http.request.method",
  urlTemplate: "url.template",
  httpStatus: "http.response.status_code",
  serverAddress: "server.address",
  serverPort: "server.port",
} as const;
