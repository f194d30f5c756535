import type { CallFields } from "../../src/logging/records.js";

/**
 * The call's own fields of a record a test builds by hand (trace, audit, intent): every such
 * record spreads these, so a field added to CallFields is given its test value here, once.
 */
export const callFields = (requestId: string): CallFields => ({
  request_id: requestId,
  by: "user:alice@korral.example",
});
