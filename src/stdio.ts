import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { ConfigError, loadConfig } from "./config.js";
import { createKeyProvider } from "./keys/index.js";
import { setUpLogging } from "./logging/setup.js";
import { limiterFor } from "./rate-limit.js";
import { createServer, defaultDeps } from "./server.js";

// stdout carries JSON-RPC frames only; everything else goes to stderr.
async function main(): Promise<void> {
  const config = loadConfig();
  const recorder = setUpLogging(config, "stdio");
  const server = createServer(
    defaultDeps(
      {
        keys: await createKeyProvider(config),
        recorder,
        limiter: limiterFor(config.rateLimitPerMin),
      },
      config,
    ),
  );
  await server.connect(new StdioServerTransport());
  console.error("korral-storelink MCP server running on stdio");

  // The client closing stdin is the end of the session.
  const stop = (): void => {
    void server
      .close()
      .then(() => recorder.close())
      .finally(() => process.exit(0));
  };
  process.stdin.once("end", stop);
  process.stdin.once("close", stop);
}

main().catch((error: unknown) => {
  console.error(
    error instanceof ConfigError ? error.message : "korral-storelink failed to start on stdio",
  );
  process.exit(error instanceof ConfigError ? 2 : 1);
});
