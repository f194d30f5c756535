import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  canonicalPrincipalId,
  osPrincipal,
  PRINCIPAL_KINDS,
  PRINCIPAL_MAX_LENGTH,
  principalProblem,
} from "../../src/policy/principal.js";
import {
  type PolicyAction,
  type PolicyDocument,
  parsePolicy,
  type StorePolicy,
} from "../../src/policy/store-policy.js";
import { ID_PATTERN } from "../../src/storelink/ids.js";
import { RUNS } from "../helpers/arbitraries.js";

/**
 * The store policy against an independent statement of its rule, over arbitrary policies and
 * questions: granted exactly when one of the principal's groups (named, or through an IdP group)
 * lists the store (or "*") for that action and the call's category (or lists no categories);
 * enforce refuses everything else, shadow refuses nothing and reports exactly what enforce
 * refuses. And principals: whatever a token or an OS account holds, an accepted id is canonical
 * and safe in a log line.
 */

const STORES = ["47", "63", "102", "111", "128", "A-1"];
const CATEGORIES = ["Dairy", "Bakery", "Produce"];
const GROUPS = ["g0", "g1", "g2", "g3"];
const PRINCIPALS = [
  "user:ann@k.example",
  "svc:bot@k.example",
  "client:rep",
  "local:dan",
  "os:eve@pc",
];
const CLAIMS = ["Buyers", "Ops"];

const subset = <T>(items: readonly T[]) => fc.subarray([...items]);
const everyOr = <T>(items: readonly T[]) => fc.oneof(fc.constant("*" as const), subset(items));
const grant = fc.record(
  { stores: everyOr(STORES), categories: everyOr(CATEGORIES) },
  { requiredKeys: ["stores"] },
);
const documentArb: fc.Arbitrary<PolicyDocument> = fc.record({
  version: fc.constant(1 as const),
  mode: fc.constantFrom("enforce" as const, "shadow" as const),
  groups: fc
    .array(fc.record({ read: grant, order: grant }, { requiredKeys: [] }), {
      minLength: GROUPS.length,
      maxLength: GROUPS.length,
    })
    .map((groups) => Object.fromEntries(GROUPS.map((name, i) => [name, groups[i] ?? {}]))),
  principals: fc.dictionary(fc.constantFrom(...PRINCIPALS), subset(GROUPS)),
  idp_groups: fc.dictionary(fc.constantFrom(...CLAIMS), subset(GROUPS)),
});

const question = fc.record({
  id: fc.constantFrom(...PRINCIPALS, "user:nobody@k.example", "client:other"),
  idpGroups: subset([...CLAIMS, "Unknown"]),
  action: fc.constantFrom<PolicyAction>("read", "order"),
  store: fc.constantFrom(...STORES, "999"),
  category: fc.option(fc.constantFrom(...CATEGORIES, "dairy", "Frozen"), { nil: undefined }),
});
type Question = typeof question extends fc.Arbitrary<infer Q> ? Q : never;

/** The groups the document grants `q` through, by the rule written out again. */
function oracle(document: PolicyDocument, q: Question): string[] {
  const mine = new Set([
    ...(document.principals[q.id] ?? []),
    ...q.idpGroups.flatMap((claim) => document.idp_groups?.[claim] ?? []),
  ]);
  return [...mine].filter((name) => {
    const g = document.groups[name]?.[q.action];
    if (g === undefined) return false;
    const store = g.stores === "*" || g.stores.includes(q.store);
    const category =
      g.categories === undefined ||
      g.categories === "*" ||
      (q.category !== undefined &&
        g.categories.some((c) => c.toLowerCase() === q.category?.toLowerCase()));
    return store && category;
  });
}

function load(document: PolicyDocument): StorePolicy {
  const parsed = parsePolicy(JSON.stringify(document));
  if ("problem" in parsed) throw new Error(parsed.problem);
  return parsed.policy;
}

const ask = (policy: StorePolicy, q: Question) =>
  policy.may({ id: q.id, idpGroups: q.idpGroups }, q.action, q.store, q.category);

describe("the store policy's rule", () => {
  it("grants exactly what the rule grants; enforce refuses the rest, shadow lets it through", () => {
    fc.assert(
      fc.property(
        documentArb,
        fc.array(question, { minLength: 1, maxLength: 8 }),
        (document, qs) => {
          const policy = load(document);
          for (const q of qs) {
            const granting = oracle(document, q);
            const decision = ask(policy, q);
            if (granting.length > 0) {
              expect(decision.verdict).toBe("granted");
              expect(decision.verdict === "granted" && [...decision.groups].sort()).toEqual(
                granting.sort(),
              );
            } else {
              expect(decision.verdict).toBe(document.mode === "shadow" ? "shadow" : "refused");
            }
            expect(decision.allowed).toBe(granting.length > 0 || document.mode === "shadow");
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it("shadow never refuses and reports exactly what the same policy under enforce refuses", () => {
    fc.assert(
      fc.property(
        documentArb,
        fc.array(question, { minLength: 1, maxLength: 8 }),
        (document, qs) => {
          const shadow = load({ ...document, mode: "shadow" });
          const enforce = load({ ...document, mode: "enforce" });
          for (const q of qs) {
            const s = ask(shadow, q);
            const e = ask(enforce, q);
            expect(s.allowed).toBe(true);
            expect(s.verdict === "shadow").toBe(e.verdict === "refused");
            if (s.verdict === "shadow")
              expect(s.reason).toBe(`shadow mode, not refused: ${e.reason}`);
          }
        },
      ),
      RUNS,
    );
  });

  it("default deny: a principal the policy does not name, with no IdP group it knows, gets nothing", () => {
    fc.assert(
      fc.property(documentArb, question, (document, q) => {
        const policy = load({ ...document, mode: "enforce" });
        const stranger = { ...q, id: "user:stranger@k.example", idpGroups: ["Unknown"] };
        expect(ask(policy, stranger).allowed).toBe(false);
        const { [q.id]: _gone, ...others } = document.principals;
        const unnamed = load({ ...document, mode: "enforce", principals: others, idp_groups: {} });
        expect(ask(unnamed, q).allowed).toBe(false);
      }),
      RUNS,
    );
  });

  it('"*" grants every store id the id rule admits, and no id it refuses', () => {
    const policy = load({
      version: 1,
      groups: { all: { read: { stores: "*" } } },
      principals: { "client:rep": ["all"] },
    });
    fc.assert(
      fc.property(fc.string({ maxLength: 70 }), (store) => {
        const valid = store.length <= 64 && ID_PATTERN.test(store);
        expect(policy.may({ id: "client:rep" }, "read", store).allowed).toBe(valid);
        expect(policy.may({ id: "client:rep" }, "order", store).allowed).toBe(false);
      }),
      { numRuns: 300 },
    );
  });

  it("any JSON value is parsed or refused, never thrown, and only an object can be a policy", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const parsed = parsePolicy(JSON.stringify(value) ?? "null");
        if ("policy" in parsed) expect(value).toMatchObject({ version: 1 });
      }),
      { numRuns: 300 },
    );
  });

  it("an unknown field anywhere in a valid policy refuses it", () => {
    fc.assert(
      fc.property(
        documentArb.filter((d) => Object.keys(d.groups).length > 0),
        fc.constantFrom("top", "group", "grant"),
        (document, where) => {
          const copy = structuredClone(document) as Record<string, unknown>;
          const groups = copy.groups as Record<string, Record<string, unknown>>;
          const group = groups[Object.keys(groups)[0] as string] as Record<string, unknown>;
          if (where === "top") copy.extra = 1;
          if (where === "group") group.extra = 1;
          if (where === "grant") group.read = { stores: "*", extra: 1 };
          expect(parsePolicy(JSON.stringify(copy))).toHaveProperty("problem");
        },
      ),
      RUNS,
    );
  });
});

describe("principals", () => {
  const anyText = fc.string({ unit: "binary", maxLength: 80 });
  const idLike = fc.oneof(
    fc
      .tuple(fc.constantFrom(...PRINCIPAL_KINDS, "admin", "User"), anyText)
      .map(([k, b]) => `${k}:${b}`),
    fc
      .tuple(
        fc.constantFrom("user", "svc", "os"),
        fc.stringMatching(/^[A-Za-z0-9._%+-]{1,10}$/),
        fc.domain(),
      )
      .map(([k, local, domain]) => `${k}:${local}@${domain}`),
    anyText,
  );

  it("an accepted id is canonical (idempotent), of its kind, and safe in a log line", () => {
    fc.assert(
      fc.property(idLike, (id) => {
        const checked = canonicalPrincipalId(id);
        if ("problem" in checked) return;
        expect(canonicalPrincipalId(checked.id)).toEqual({ id: checked.id });
        expect(PRINCIPAL_KINDS).toContain(checked.id.slice(0, checked.id.indexOf(":")));
        expect(checked.id.length).toBeLessThanOrEqual(PRINCIPAL_MAX_LENGTH);
        // Printable ASCII without space, quote or backslash.
        expect(checked.id).toMatch(/^[!#-[\]-~]+$/);
      }),
      { numRuns: 500 },
    );
  });

  it("any OS login and host name give a valid os: principal", () => {
    fc.assert(
      fc.property(anyText, fc.string({ unit: "binary", maxLength: 300 }), (login, host) => {
        const principal = osPrincipal(login, host);
        expect(principalProblem(principal.id)).toBeUndefined();
        expect(principal.id.startsWith("os:")).toBe(true);
        expect(principal.verified).toBe(false);
      }),
      { numRuns: 500 },
    );
  });
});
