/**
 * The one rule for ids that name a StoreLink resource (store_id, sku, order_id): the tool schemas
 * (tools/common.ts) and both StoreLink clients check it. Ids become URL path segments, and
 * encodeURIComponent leaves `.` alone, so `..` or `.` would be resolved away by URL normalisation
 * and silently change the route (GET /v1/skus/.. is GET /v1/). The alphabet is deliberately
 * small: every id in the seed and the contract ("47", "8847291", "RPL-47-001") fits, and nothing
 * in it can be a dot segment, a separator, an escape, whitespace or a control character.
 */
export const ID_PATTERN = /^[A-Za-z0-9](?:[A-Za-z0-9_-]*[A-Za-z0-9])?$/;

/** The longest id a StoreLink client sends; the tool schemas are stricter per field. */
export const ID_MAX_LENGTH = 64;

/** The rule in words, for messages that tell the model what to fix. */
export const ID_RULE =
  "letters, digits, - and _ only, starting and ending with a letter or digit " +
  "(no dots, slashes, spaces or control characters)";

export const isValidId = (value: string): boolean =>
  value.length <= ID_MAX_LENGTH && ID_PATTERN.test(value);

/**
 * An id refused by a StoreLink client before anything was sent. errors.ts reports it as the
 * caller's mistake (invalid_arguments): never `internal`, never an uncertain write. The id itself
 * is not quoted, so nothing hostile is echoed into results or logs.
 */
export class InvalidIdError extends Error {
  override readonly name = "InvalidIdError";
  constructor(
    message = `Refused an id that could change the StoreLink route: store_id, sku and order_id must be at most ${ID_MAX_LENGTH} characters of ${ID_RULE}. Nothing was sent to StoreLink.`,
  ) {
    super(message);
  }
}

/** Returns `value` if it satisfies the id rule; throws InvalidIdError otherwise. */
export function checkId(value: string): string {
  if (typeof value !== "string" || !isValidId(value)) throw new InvalidIdError();
  return value;
}

/**
 * The one rule for an idempotency key (the tool schema's alphabet, the contract's 200 characters):
 * both StoreLink clients check it before a create sends the key and before a read or fence puts
 * it in the route (/order-requests/{key}), where `.` and `..` would be dot segments.
 */
export const IDEMPOTENCY_KEY_PATTERN = /^[A-Za-z0-9._:-]{1,200}$/;

export const isValidIdempotencyKey = (value: string): boolean =>
  typeof value === "string" &&
  IDEMPOTENCY_KEY_PATTERN.test(value) &&
  value !== "." &&
  value !== "..";

/** An idempotency key refused before anything was sent; like InvalidIdError, never quoted. */
export class InvalidIdempotencyKeyError extends InvalidIdError {
  constructor() {
    super(
      "Refused an idempotency_key outside the rule: 1 to 200 characters of letters, digits and . _ : - (not . or ..). Nothing was sent to StoreLink.",
    );
  }
}

/** Returns `value` if it satisfies the idempotency-key rule; throws InvalidIdempotencyKeyError. */
export function checkIdempotencyKey(value: string): string {
  if (!isValidIdempotencyKey(value)) throw new InvalidIdempotencyKeyError();
  return value;
}
