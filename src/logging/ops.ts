import pino, { type Logger } from "pino";

/**
 * Operational log: startup, configuration summary, errors. Always on stderr: in stdio mode stdout
 * belongs to the JSON-RPC transport, and one stream keeps both modes alike.
 */
export const opsLog: Logger = pino(
  {
    name: "korral-storelink",
    level: process.env.LOG_LEVEL ?? "info",
    base: undefined,
  },
  pino.destination({ dest: 2, sync: false }),
);
