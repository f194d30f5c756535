import type { IncomingHttpHeaders } from "node:http";
import type { CallOrigin } from "../../logging/call-record.js";
import { traceFieldsOf } from "../../logging/trace-context.js";
import type { Verified } from "./verify.js";

/**
 * Who a call with a verified token acts for: its principal (which also keys the rate limit and
 * binds confirmation state), its client and its IdP groups. The one place a verified token
 * becomes the origin of a call, for the calls that run (app.ts) and the writes the gate refuses
 * (gate.ts). Imports no verifier: the app stays free of jose when KORRAL_AUTH is none.
 */
export const verifiedOrigin = (verified: Verified, headers: IncomingHttpHeaders): CallOrigin => ({
  by: verified.principal,
  client: verified.clientId,
  groups: verified.groups,
  caller: verified.principal,
  traceFields: traceFieldsOf(headers),
});
