import { z } from "zod";
import { notPermitted, policyUnavailable, type ToolError } from "../errors.js";
import { ID_MAX_LENGTH, ID_PATTERN, ID_RULE, isValidId } from "../storelink/ids.js";
import { canonicalPrincipalId } from "./principal.js";

/**
 * The store policy: which principal may read and order for which stores (docs/identity.md,
 * "Store policy"). Default deny: a principal the policy does not name, or whose groups grant
 * nothing for a store, may do nothing there. In `shadow` mode nothing is refused: a call the
 * policy would refuse is let through and reported as such, for a trial before `enforce`.
 *
 * ```json
 * { "version": 1, "mode": "enforce",
 *   "groups": { "dairy-south": { "read": { "stores": ["47", "63"] }, "order": { "stores": ["47"] } },
 *               "all-read": { "read": { "stores": "*" } } },
 *   "principals": { "user:alice@korral.example": ["dairy-south"], "client:reporting": ["all-read"] },
 *   "idp_groups": { "korral-dairy-buyers": ["dairy-south"] } }
 * ```
 */

export type PolicyAction = "read" | "order";
export const POLICY_MODES = ["enforce", "shadow"] as const;
export type PolicyMode = (typeof POLICY_MODES)[number];

/** The largest policy read, in bytes (file or secret); a larger one is refused, not parsed. */
export const POLICY_MAX_BYTES = 1024 * 1024;
/** Longest list of stores, categories or groups in one place. */
const MAX_LIST = 10_000;

const GROUP_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const GROUP_RULE = "1 to 64 letters, digits, . _ -, starting with a letter or digit";
/** A value of an IdP's groups claim: printable ASCII (spaces inside), no quote or backslash. */
const IDP_GROUP = /^[!#-[\]-~](?:[ !#-[\]-~]{0,126}[!#-[\]-~])?$/;
/** A SKU category as StoreLink names it ("Dairy"): compared without case. */
const CATEGORY = /^[^\p{Cc}]{1,64}$/u;

const storeId = z
  .string()
  .max(ID_MAX_LENGTH, `a store id is at most ${ID_MAX_LENGTH} characters`)
  .regex(ID_PATTERN, `a store id is ${ID_RULE}`);
const everyOr = <T extends z.ZodType>(item: T) =>
  z.union([z.literal("*"), z.array(item).max(MAX_LIST)], {
    error: 'must be "*" or a list',
  });

const grantSchema = z.strictObject({
  stores: everyOr(storeId),
  /** Absent or "*": every category. */
  categories: everyOr(z.string().regex(CATEGORY, "a category is 1 to 64 characters")).optional(),
});
const groupSchema = z.strictObject({
  read: grantSchema.optional(),
  order: grantSchema.optional(),
  /** May trigger the reconciler (`POST /internal/reconcile`), for every store: a scheduler. */
  reconcile: z.literal(true, { error: "must be true (or absent)" }).optional(),
});
const groupList = z.array(z.string()).max(MAX_LIST);

const policySchema = z
  .strictObject({
    version: z.literal(1, { error: "must be 1" }),
    /** Absent: enforce (the safe reading). */
    mode: z.enum(POLICY_MODES).default("enforce"),
    groups: z.record(z.string(), groupSchema),
    principals: z.record(z.string(), groupList),
    /** Values of the IdP's groups claim, each to the policy groups it stands for. */
    idp_groups: z.record(z.string(), groupList).optional(),
  })
  .superRefine((policy, ctx) => {
    for (const name of Object.keys(policy.groups)) {
      if (!GROUP_NAME.test(name)) {
        ctx.addIssue({
          code: "custom",
          path: ["groups", name],
          message: `a group name is ${GROUP_RULE}`,
        });
      }
    }
    const refs = (where: "principals" | "idp_groups", key: string, names: readonly string[]) => {
      names.forEach((name, index) => {
        if (!Object.hasOwn(policy.groups, name)) {
          ctx.addIssue({
            code: "custom",
            path: [where, key, index],
            message: "names no group of groups",
          });
        }
      });
    };
    const seen = new Set<string>();
    for (const [id, names] of Object.entries(policy.principals)) {
      const checked = canonicalPrincipalId(id);
      if ("problem" in checked) {
        ctx.addIssue({ code: "custom", path: ["principals", id], message: checked.problem });
      } else if (seen.has(checked.id)) {
        ctx.addIssue({
          code: "custom",
          path: ["principals", id],
          message: "names a principal listed already (addresses are compared without case)",
        });
      } else {
        seen.add(checked.id);
      }
      refs("principals", id, names);
    }
    for (const [claim, names] of Object.entries(policy.idp_groups ?? {})) {
      if (!IDP_GROUP.test(claim)) {
        ctx.addIssue({
          code: "custom",
          path: ["idp_groups", claim],
          message: "an IdP group is 1 to 128 printable ASCII characters, no quotes or backslashes",
        });
      }
      refs("idp_groups", claim, names);
    }
  });

/** The policy document as written (the JSON's shape), for tests and tooling. */
export type PolicyDocument = z.input<typeof policySchema>;

/** Who asks: a principal id (see principal.ts) and, from a verified token, its IdP groups. */
export interface PolicySubject {
  readonly id: string;
  readonly idpGroups?: readonly string[];
}

/**
 * What the policy says about one action at one store. `allowed` is what the caller does;
 * `shadow` is a call the policy refuses in enforce mode, let through because the policy is in
 * shadow mode (log it as a refusal that was not made). `unavailable`: no policy could be read;
 * fail closed. `reason` names the principal, the action, the store and the groups, never a
 * value the policy or the caller supplied that failed its check.
 */
export type Decision =
  | {
      readonly verdict: "granted";
      readonly allowed: true;
      readonly reason: string;
      readonly groups: readonly string[];
    }
  | { readonly verdict: "shadow"; readonly allowed: true; readonly reason: string }
  | { readonly verdict: "refused"; readonly allowed: false; readonly reason: string }
  | { readonly verdict: "unavailable"; readonly allowed: false; readonly reason: string };

/**
 * For a check made before the SKU's category is known (a write is checked before any StoreLink
 * call): a grant for the store covers it whatever categories it names; the category is checked
 * again once known.
 */
export const SOME_CATEGORY = Symbol("some category");

export interface StorePolicy {
  /** `unavailable`: no policy could be read; `open`: none is configured, everyone may do all. */
  readonly mode: PolicyMode | "unavailable" | "open";
  /**
   * May `who` do `action` at `storeId`? With `category` (the SKU's, as StoreLink names it), a
   * grant limited to categories can cover the call; without one, only grants for every category
   * can; with SOME_CATEGORY, any grant for the store can.
   */
  may(
    who: PolicySubject,
    action: PolicyAction,
    storeId: string,
    category?: string | typeof SOME_CATEGORY,
  ): Decision;
  /** May `who` run the reconciler (a group with `"reconcile": true`)? */
  mayReconcile(who: PolicySubject): Decision;
}

type Grant = { stores: ReadonlySet<string> | "*"; categories: ReadonlySet<string> | "*" };
type Group = Partial<Record<PolicyAction, Grant>> & { reconcile?: true };

const categoryKey = (category: string): string => category.trim().toLowerCase();

/**
 * The one rule of the policy: a grant covers a store when it lists the store (or says "*"), and
 * covers the call's category when it lists no categories (or "*") or lists that one.
 */
function covers(
  grant: Grant,
  storeId: string,
  category: string | typeof SOME_CATEGORY | undefined,
): boolean {
  const store = grant.stores === "*" || grant.stores.has(storeId);
  const kind =
    grant.categories === "*" ||
    category === SOME_CATEGORY ||
    (category !== undefined && grant.categories.has(categoryKey(category)));
  return store && kind;
}

const toGrant = (grant: z.output<typeof grantSchema> | undefined): Grant | undefined =>
  grant === undefined
    ? undefined
    : {
        stores: grant.stores === "*" ? "*" : new Set(grant.stores),
        categories:
          grant.categories === undefined || grant.categories === "*"
            ? "*"
            : new Set(grant.categories.map(categoryKey)),
      };

/** A subject's canonical id (if valid) and its groups. */
type Membership = { readonly id: string | undefined; readonly groups: readonly string[] };

/** Subjects whose groups a loaded policy remembers (then it starts over): bounds its memory. */
const MAX_SUBJECTS = 1_000;

class LoadedPolicy implements StorePolicy {
  readonly #groups: ReadonlyMap<string, Group>;
  readonly #principals: ReadonlyMap<string, readonly string[]>;
  readonly #idpGroups: ReadonlyMap<string, readonly string[]>;

  constructor(
    readonly mode: PolicyMode,
    policy: z.output<typeof policySchema>,
  ) {
    this.#groups = new Map(
      Object.entries(policy.groups).map(([name, g]) => [
        name,
        { read: toGrant(g.read), order: toGrant(g.order), reconcile: g.reconcile },
      ]),
    );
    // Every key passed canonicalPrincipalId in the schema's refinement.
    this.#principals = new Map(
      Object.entries(policy.principals).map(([id, groups]) => [
        (canonicalPrincipalId(id) as { id: string }).id,
        groups,
      ]),
    );
    this.#idpGroups = new Map(Object.entries(policy.idp_groups ?? {}));
  }

  /** What #groupsOf found per subject: this policy never changes, so neither does its answer. */
  readonly #subjects = new Map<string, Membership>();

  /** The principal's canonical id (if valid) and every group it has, named or through its IdP. */
  #groupsOf(who: PolicySubject): Membership {
    const idpGroups = who.idpGroups ?? [];
    // Each part length-prefixed: no id or group, however odd, can pass for another subject's.
    let key = `${who.id.length}:${who.id}`;
    for (const claim of idpGroups) key += `${claim.length}:${claim}`;
    const known = this.#subjects.get(key);
    if (known !== undefined) return known;
    const checked = canonicalPrincipalId(who.id);
    const id = "id" in checked ? checked.id : undefined;
    const named = id === undefined ? [] : (this.#principals.get(id) ?? []);
    const viaIdp = idpGroups.flatMap((claim) => this.#idpGroups.get(claim) ?? []);
    const membership = { id, groups: Object.freeze([...new Set([...named, ...viaIdp])]) };
    if (this.#subjects.size >= MAX_SUBJECTS) this.#subjects.clear();
    this.#subjects.set(key, membership);
    return membership;
  }

  mayReconcile(who: PolicySubject): Decision {
    const { id, groups } = this.#groupsOf(who);
    const granting = groups.filter((name) => this.#groups.get(name)?.reconcile === true);
    return this.#decision(
      id,
      granting,
      "run the reconciler",
      () => 'no group of theirs has "reconcile": true',
    );
  }

  may(
    who: PolicySubject,
    action: PolicyAction,
    storeId: string,
    category?: string | typeof SOME_CATEGORY,
  ): Decision {
    const { id, groups } = this.#groupsOf(who);
    const granting = isValidId(storeId)
      ? groups.filter((name) => {
          const grant = this.#groups.get(name)?.[action];
          return grant !== undefined && covers(grant, storeId, category);
        })
      : [];
    const doing = `${action === "read" ? "read" : "order for"} store ${isValidId(storeId) ? storeId : "(an invalid store id)"}`;
    return this.#decision(id, granting, doing, () =>
      groups.length === 0
        ? "the policy gives them no group"
        : `none of their groups (${groups.join(", ")}) grants it${typeof category === "string" ? " for this category" : ""}`,
    );
  }

  /** Granted by `granting`, or refused for `why` (let through in shadow mode). */
  #decision(
    id: string | undefined,
    granting: string[],
    doing: string,
    why: () => string,
  ): Decision {
    const subject = id ?? "a caller that is not a valid principal";
    if (granting.length > 0) {
      return {
        verdict: "granted",
        allowed: true,
        groups: granting,
        reason: `${subject} may ${doing} (group ${granting.join(", ")})`,
      };
    }
    const refusal = `${subject} may not ${doing}: ${why()}`;
    return this.mode === "shadow"
      ? { verdict: "shadow", allowed: true, reason: `shadow mode, not refused: ${refusal}` }
      : { verdict: "refused", allowed: false, reason: refusal };
  }
}

/** No store policy configured (KORRAL_AUTH=none, or stdio without one): every call is allowed. */
export const OPEN_POLICY: StorePolicy = {
  mode: "open",
  may: () => ({ verdict: "granted", allowed: true, groups: [], reason: "no store policy" }),
  mayReconcile: () => ({
    verdict: "granted",
    allowed: true,
    groups: [],
    reason: "no store policy",
  }),
};

/** The policy in force when none could be read: every decision fails closed. */
export function unavailablePolicy(problem: string): StorePolicy {
  const reason = `store policy unavailable: ${problem}`;
  return {
    mode: "unavailable",
    may: () => ({ verdict: "unavailable", allowed: false, reason }),
    mayReconcile: () => ({ verdict: "unavailable", allowed: false, reason }),
  };
}

/** The field names of the documented shape: an error may name them. */
const FIELDS = new Set([
  "version",
  "mode",
  "groups",
  "principals",
  "idp_groups",
  "read",
  "order",
  "reconcile",
  "stores",
  "categories",
]);

/** Whether a key of the record `parent` passed its own check, so an error may name it. */
function namedKey(parent: PropertyKey | undefined, key: string): boolean {
  if (parent === "groups") return GROUP_NAME.test(key);
  if (parent === "principals") return "id" in canonicalPrincipalId(key);
  if (parent === "idp_groups") return IDP_GROUP.test(key);
  return false;
}

/**
 * A path of the document in words. Only field names and the records' keys that passed their check
 * are named; any other key is "(a key)", since it may be anything the file holds.
 */
function where(path: readonly PropertyKey[]): string {
  let out = "";
  for (const [i, segment] of path.entries()) {
    if (typeof segment === "number") {
      out += `[${segment}]`;
      continue;
    }
    const text = String(segment);
    const named = i === 1 ? namedKey(path[0], text) : FIELDS.has(text);
    out += `${out === "" ? "" : "."}${named ? text : "(a key)"}`;
  }
  return out === "" ? "the document" : out;
}

/**
 * Parses a policy document (its JSON text, already read). The result is the policy, or the
 * problems in words: where, and what is wrong, never a value from the text (a policy pointed at
 * the wrong file must not leak that file into a log).
 */
export function parsePolicy(text: string): { policy: StorePolicy } | { problem: string } {
  // An editor's UTF-8 byte-order mark is not part of the JSON.
  const body = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  let json: unknown;
  // A `__proto__` key would become a prototype, not an entry, when zod copies a record: a group
  // or principal silently gone. Refused instead.
  let prototypeKey = false;
  try {
    json = JSON.parse(body, (key, value: unknown) => {
      if (key === "__proto__") prototypeKey = true;
      return value;
    });
  } catch {
    // The parser's message quotes the text: dropped on purpose.
    return { problem: "not valid JSON" };
  }
  if (prototypeKey) return { problem: "not a store policy: it has a key named __proto__" };
  const parsed = policySchema.safeParse(json);
  if (!parsed.success) {
    const issues = parsed.error.issues;
    const said = issues.slice(0, 3).map((issue) => {
      const what =
        issue.code === "unrecognized_keys"
          ? `${issue.keys.length === 1 ? "a field" : `${issue.keys.length} fields`} not in the documented shape`
          : issue.message;
      return `${where(issue.path)}: ${what}`;
    });
    const more = issues.length > 3 ? ` (and ${issues.length - 3} more)` : "";
    return { problem: `not a store policy: ${said.join("; ")}${more}` };
  }
  return { policy: new LoadedPolicy(parsed.data.mode, parsed.data) };
}

/**
 * The tool error for a decision that does not allow the call (undefined when it does): a policy
 * that could not be read gives `policy_unavailable` (retryable), a refusal `not_permitted`. A
 * read turns it into that store's entry; a write into its refusal, audited REJECTED.
 */
export function refusalOf(
  decision: Decision,
  who: PolicySubject,
  action: PolicyAction,
  storeId: string,
): ToolError | undefined {
  if (decision.allowed) return undefined;
  // Both are quoted to the model: only checked values, never what failed a check.
  const store = isValidId(storeId) ? storeId : "(an invalid store id)";
  if (decision.verdict === "unavailable") return policyUnavailable(store, action);
  const checked = canonicalPrincipalId(who.id);
  return notPermitted(store, action, "id" in checked ? checked.id : "this caller");
}
