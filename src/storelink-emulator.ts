import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { pathToFileURL } from "node:url";
import express, { type Express, type NextFunction, type Request, type Response } from "express";
import { z } from "zod";
import { ConfigError, parseEnv } from "./config.js";
import { ApiKey } from "./keys/api-key.js";
import { isStoreLinkError, type StoreLinkErrorKind } from "./storelink/client.js";
import { KEY_SOURCE_HEADER, STORELINK_KEY_HEADER } from "./storelink/http.js";
import { InvalidIdError, isValidIdempotencyKey } from "./storelink/ids.js";
import { InMemoryStoreLink } from "./storelink/memory.js";

/**
 * A StoreLink emulator serving openapi/storelink.yaml. Every call is delegated to one
 * `InMemoryStoreLink`, so its rules (check order, numbering, idempotency) hold here unchanged and
 * orders live as long as this process. For tests and local runs only: it authenticates nothing real.
 */

/** Mutable test faults, consumed one per order POST. */
export interface EmulatorFaults {
  /** Apply the next N order POSTs, then drop the socket unanswered. */
  cutAfterOrders: number;
  /** Apply the next N order POSTs, then never answer (the caller's deadline ends it). */
  stallAfterOrders?: number;
  /** Answer the next order POSTs with these statuses and error codes BEFORE acting (an outage). */
  refuseOrders?: { status: number; code: string }[];
  /** Drop the next N order POSTs unapplied (socket destroyed): they never reached StoreLink. */
  dropOrders?: number;
  /**
   * For the next `count` order POSTs, drop the socket at once and apply the create `afterMs`
   * later: a delayed copy arriving late (a key fenced meanwhile creates nothing).
   */
  lateOrders?: { count: number; afterMs: number; after?: Promise<unknown> };
}

export interface EmulatorOptions {
  storelink?: InMemoryStoreLink;
  faults?: EmulatorFaults;
}

const STATUS: Record<StoreLinkErrorKind, number> = {
  unauthorized: 401,
  unknown_store: 404,
  unknown_sku: 404,
  order_not_found: 404,
  not_ranged: 422,
  idempotency_conflict: 409,
  idempotency_key_fenced: 409,
  order_request_not_found: 404,
  order_request_in_progress: 409,
  unavailable: 503,
  outcome_unknown: 500,
  // A client's conclusion about a StoreLink before contract 1.1; never thrown by InMemoryStoreLink.
  unsupported: 500,
};

const orderBody = z.strictObject({
  sku: z.string().min(1).max(64),
  quantity: z.number().int().min(1),
  reason: z.string().min(1).max(4000),
});
const idempotencyKey = z.string().refine(isValidIdempotencyKey);

const sendError = (res: Response, status: number, code: string, message: string): void => {
  if (res.headersSent) return;
  res.status(status).json({ error: { code, message } });
};

// A missing header is an empty key: the in-memory store then answers 401 (after its store check).
const keyOf = (req: Request): ApiKey => new ApiKey(req.get(STORELINK_KEY_HEADER) ?? "");

/**
 * The emulator's own environment (a separate program, so not in the server's config.ts, whose
 * variables are the server's): PORT (0 = any free port), HOST, and the test fault.
 */
const emulatorEnv = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8090),
  HOST: z.string().min(1).default("127.0.0.1"),
  STORELINK_EMULATOR_CUT_AFTER_ORDERS: z.coerce.number().int().min(0).default(0),
  STORELINK_EMULATOR_DROP_ORDERS: z.coerce.number().int().min(0).default(0),
  /** `count:afterMs`, e.g. `1:500`. */
  STORELINK_EMULATOR_LATE_ORDERS: z
    .string()
    .regex(/^\d{1,6}:\d{1,7}$/, "must be count:afterMs, e.g. 1:500")
    .transform((value) => {
      const [count, afterMs] = value.split(":").map(Number);
      return { count: count ?? 0, afterMs: afterMs ?? 0 };
    })
    .optional(),
});

export interface EmulatorConfig {
  port: number;
  host: string;
  cutAfterOrders: number;
  dropOrders: number;
  lateOrders?: { count: number; afterMs: number };
}

export function loadEmulatorConfig(env: NodeJS.ProcessEnv = process.env): EmulatorConfig {
  const c = parseEnv(emulatorEnv, env, "emulator configuration");
  return {
    port: c.PORT,
    host: c.HOST,
    cutAfterOrders: c.STORELINK_EMULATOR_CUT_AFTER_ORDERS,
    dropOrders: c.STORELINK_EMULATOR_DROP_ORDERS,
    ...(c.STORELINK_EMULATOR_LATE_ORDERS ? { lateOrders: c.STORELINK_EMULATOR_LATE_ORDERS } : {}),
  };
}

type Handler = (req: Request, res: Response) => Promise<void>;
const route =
  (handler: Handler) =>
  (req: Request, res: Response, next: NextFunction): void => {
    handler(req, res).catch((error: unknown) => {
      if (isStoreLinkError(error)) {
        sendError(res, STATUS[error.kind], error.kind, error.message);
      } else if (error instanceof InvalidIdError) {
        // An id outside the shared rule, from a client that does not check it: refused, not 500.
        sendError(res, 400, "invalid_request", "Ids must be letters, digits, - and _ only.");
      } else {
        next(error);
      }
    });
  };

const param = (req: Request, name: string): string => String(req.params[name]);

export function createEmulatorApp(options: EmulatorOptions = {}): Express {
  const storelink = options.storelink ?? new InMemoryStoreLink();
  const faults = options.faults ?? { cutAfterOrders: 0 };
  const app = express();
  app.disable("x-powered-by");

  app.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });

  app.get(
    "/v1/stores",
    route(async (_req, res) => {
      res.json({ stores: await storelink.listStores() });
    }),
  );

  app.get(
    "/v1/skus",
    route(async (req, res) => {
      const q = req.query.q;
      if (typeof q !== "string") {
        sendError(res, 400, "invalid_request", "Query parameter q is required, once.");
        return;
      }
      res.json({ skus: await storelink.lookupSku(q) });
    }),
  );

  app.get(
    "/v1/skus/:sku",
    route(async (req, res) => {
      res.json(await storelink.getSku(param(req, "sku")));
    }),
  );

  app.get(
    "/v1/stores/:storeId/stock/:sku",
    route(async (req, res) => {
      res.json(await storelink.getStock(param(req, "storeId"), param(req, "sku"), keyOf(req)));
    }),
  );

  app.post(
    "/v1/stores/:storeId/orders",
    express.json({ limit: "64kb" }),
    route(async (req, res) => {
      const refusal = faults.refuseOrders?.shift();
      if (refusal) {
        sendError(res, refusal.status, refusal.code, "Injected failure; nothing was done.");
        return;
      }
      const body = orderBody.safeParse(req.body);
      const rawKey = req.get("Idempotency-Key");
      const key = rawKey === undefined ? undefined : idempotencyKey.safeParse(rawKey);
      if (!body.success || (key !== undefined && !key.success)) {
        sendError(res, 400, "invalid_request", "Body must be {sku, quantity, reason}.");
        return;
      }
      const request = {
        store_id: param(req, "storeId"),
        ...body.data,
        ...(key?.success ? { idempotency_key: key.data } : {}),
        ...(key?.success && req.get(KEY_SOURCE_HEADER) === "server"
          ? { key_made_by_server: true }
          : {}),
      };
      if ((faults.dropOrders ?? 0) > 0) {
        // Lost on the way: nothing is applied, and the caller hears nothing.
        faults.dropOrders = (faults.dropOrders ?? 0) - 1;
        req.socket.destroy();
        return;
      }
      const late = faults.lateOrders;
      if (late !== undefined && late.count > 0) {
        // The caller loses the connection now; a copy of the request arrives afterMs later.
        late.count -= 1;
        req.socket.destroy();
        const storeKey = keyOf(req);
        // `after` (tests): the copy lands only once it resolves, too.
        const gate = late.after ?? Promise.resolve();
        setTimeout(() => {
          void gate.then(() =>
            storelink.createOrder(request, storeKey).catch(() => {
              // Refused when it lands (a fenced key, a bad key): nothing was created.
            }),
          );
        }, late.afterMs).unref();
        return;
      }
      const created = await storelink.createOrder(request, keyOf(req));
      if (faults.cutAfterOrders > 0) {
        // The order is applied; the caller never hears so. This is the uncertain write.
        faults.cutAfterOrders -= 1;
        req.socket.destroy();
        return;
      }
      if ((faults.stallAfterOrders ?? 0) > 0) {
        // Applied, and the answer never comes: the caller times out not knowing.
        faults.stallAfterOrders = (faults.stallAfterOrders ?? 0) - 1;
        return;
      }
      res.status(created.replayed ? 200 : 201).json(created.order);
    }),
  );

  app.get(
    "/v1/stores/:storeId/orders/:orderId",
    route(async (req, res) => {
      res.json(await storelink.getOrder(param(req, "storeId"), param(req, "orderId"), keyOf(req)));
    }),
  );

  app.get(
    "/v1/stores/:storeId/order-requests/:idempotencyKey",
    route(async (req, res) => {
      res.json(
        await storelink.getOrderRequest(
          param(req, "storeId"),
          param(req, "idempotencyKey"),
          keyOf(req),
        ),
      );
    }),
  );

  app.post(
    "/v1/stores/:storeId/order-requests/:idempotencyKey/fence",
    route(async (req, res) => {
      res.json(
        await storelink.fenceOrderRequest(
          param(req, "storeId"),
          param(req, "idempotencyKey"),
          keyOf(req),
        ),
      );
    }),
  );

  app.use((_req: Request, res: Response) => {
    sendError(res, 404, "not_found", "No such route in the StoreLink contract.");
  });

  app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const type = (error as { type?: string }).type;
    if (type === "entity.parse.failed" || type === "entity.too.large") {
      sendError(res, 400, "invalid_request", "The request body is not acceptable JSON.");
    } else {
      console.error("storelink-emulator: unexpected error", error);
      sendError(res, 500, "internal", "Emulator failure.");
    }
  });
  return app;
}

export interface RunningEmulator {
  url: string;
  port: number;
  server: Server;
  faults: EmulatorFaults;
  /** TCP connections accepted so far: proves keep-alive (≈ concurrency, not call count). */
  connections(): number;
  close(): Promise<void>;
}

/** Starts the emulator on host:port (port 0 = any free port) and resolves once listening. */
export async function startEmulator(
  options: EmulatorOptions & { port?: number; host?: string } = {},
): Promise<RunningEmulator> {
  const faults = options.faults ?? { cutAfterOrders: 0 };
  const app = createEmulatorApp({ ...options, faults });
  const host = options.host ?? "127.0.0.1";
  let accepted = 0;
  const server = await new Promise<Server>((resolve, reject) => {
    const s = app.listen(options.port ?? 0, host, (error?: Error) =>
      error ? reject(error) : resolve(s),
    );
  });
  server.on("connection", () => {
    accepted += 1;
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://${host}:${port}`,
    port,
    server,
    faults,
    connections: () => accepted,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function main(): Promise<void> {
  const config = loadEmulatorConfig();
  const emulator = await startEmulator({
    port: config.port,
    host: config.host,
    faults: {
      cutAfterOrders: config.cutAfterOrders,
      dropOrders: config.dropOrders,
      ...(config.lateOrders ? { lateOrders: config.lateOrders } : {}),
    },
  });
  // One plain line on stderr, stable for tests to parse: PORT=0 is discovered from it.
  console.error(`storelink-emulator listening on ${emulator.url}`);
  const stop = (): void => {
    void emulator.close().finally(() => process.exit(0));
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  // Connection count for the benchmark, on demand (SIGUSR2 keeps it off the HTTP contract).
  process.on("SIGUSR2", () => {
    console.error(`storelink-emulator connections=${emulator.connections()}`);
  });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    console.error(
      error instanceof ConfigError ? error.message : "storelink-emulator failed to start",
    );
    process.exit(error instanceof ConfigError ? 2 : 1);
  });
}
