import { describe, expect, it } from "vitest";
import * as conventions from "../../src/telemetry/conventions.js";

/**
 * The names the server emits, held as they are: the MCP semantic conventions are Development
 * status, so a change here is a decision (dashboards, alerts and the log-based metrics read them),
 * never a side effect of a dependency update.
 */
describe("telemetry conventions", () => {
  it("pins every attribute and metric name", () => {
    expect({ ...conventions }).toEqual({
      ATTR: {
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
        write: "korral.write",
        httpMethod: "http.request.method",
        urlTemplate: "url.template",
        httpStatus: "http.response.status_code",
        serverAddress: "server.address",
        serverPort: "server.port",
        dbSystem: "db.system.name",
        dbOperation: "db.operation.name",
      },
      OPERATION_EXECUTE_TOOL: "execute_tool",
      TRANSPORT: { http: "tcp", stdio: "pipe" },
      METRICS: {
        serverOperationDuration: "mcp.server.operation.duration",
        storelinkRequestDuration: "korral.storelink.request.duration",
        limitsAvailable: "korral.limits.available",
      },
      SERVER_METRIC_ATTRIBUTES: [
        "mcp.method.name",
        "gen_ai.tool.name",
        "error.type",
        "mcp.protocol.version",
        "network.transport",
      ],
      STORELINK_METRIC_ATTRIBUTES: [
        "url.template",
        "http.request.method",
        "http.response.status_code",
        "error.type",
      ],
      DURATION_BUCKETS: [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300],
    });
  });

  it("never names the session id (not used: a session id is a bearer of the session)", () => {
    expect(JSON.stringify(conventions)).not.toContain("mcp.session.id");
  });
});
