import express from "express";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { createEmulatorApp, type EmulatorFaults } from "../../src/storelink-emulator.js";
import { listen } from "./listen.js";

/** One request as it reached StoreLink over HTTP: method and request-target, exactly as sent. */
export interface RecordedRequest {
  method: string;
  /** The raw request-target (path and query), after the client's URL normalisation. */
  target: string;
  /** The W3C trace context it carried, if any. */
  traceparent?: string;
}

export interface RecordingStoreLink {
  /** Base URL for HttpStoreLinkClient. */
  url: string;
  requests: RecordedRequest[];
  /** The emulator's faults, live: a test sets one when it needs it. */
  faults: EmulatorFaults;
  close(): Promise<void>;
}

/**
 * The StoreLink emulator on 127.0.0.1:0 behind a middleware that records every request before
 * the emulator routes it, so a test can prove what was (or was not) sent.
 */
export async function startRecordingStoreLink(
  storelink = new InMemoryStoreLink(),
  faults: EmulatorFaults = { cutAfterOrders: 0 },
): Promise<RecordingStoreLink> {
  const requests: RecordedRequest[] = [];
  const app = express();
  app.use((req, _res, next) => {
    const traceparent = req.get("traceparent");
    requests.push({
      method: req.method,
      target: req.originalUrl,
      ...(traceparent === undefined ? {} : { traceparent }),
    });
    next();
  });
  app.use(createEmulatorApp({ storelink, faults }));
  const listening = await listen(app);
  return {
    url: listening.url.replace(/\/mcp$/, ""),
    requests,
    faults,
    close: () => listening.close(),
  };
}
