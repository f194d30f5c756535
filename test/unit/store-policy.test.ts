import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ERROR_TYPES } from "../../src/errors.js";
import {
  type Decision,
  type PolicyDocument,
  parsePolicy,
  refusalOf,
  type StorePolicy,
  unavailablePolicy,
} from "../../src/policy/store-policy.js";

/**
 * The store policy's decision table: the example policy, default deny, "*", groups from
 * principals and from IdP groups, categories, shadow mode; and the shape refused strictly, its
 * problems never quoting what the document holds.
 */

const EXAMPLE: PolicyDocument = {
  version: 1,
  mode: "enforce",
  groups: {
    "dairy-south": { read: { stores: ["47", "63"] }, order: { stores: ["47"] } },
    "all-read": { read: { stores: "*" } },
  },
  principals: { "user:alice@korral.example": ["dairy-south"], "client:reporting": ["all-read"] },
};

function policyOf(document: unknown): StorePolicy {
  const parsed = parsePolicy(JSON.stringify(document));
  if ("problem" in parsed) throw new Error(parsed.problem);
  return parsed.policy;
}

function problemOf(text: string): string {
  const parsed = parsePolicy(text);
  if ("policy" in parsed) throw new Error("expected the document to be refused");
  return parsed.problem;
}

const alice = { id: "user:alice@korral.example" };
const reporting = { id: "client:reporting" };

describe("the example policy", () => {
  const policy = policyOf(EXAMPLE);

  it.each([
    // who, action, store, allowed
    [alice, "read", "47", true],
    [alice, "read", "63", true],
    [alice, "read", "102", false],
    [alice, "order", "47", true],
    // order is its own list: reading 63 does not let alice order for it
    [alice, "order", "63", false],
    [reporting, "read", "47", true],
    [reporting, "read", "128", true],
    // "*" under read grants no order
    [reporting, "order", "47", false],
    // a principal the policy does not name gets nothing (default deny)
    [{ id: "user:bob@korral.example" }, "read", "47", false],
    [{ id: "svc:agent@korral-prod.iam.gserviceaccount.com" }, "read", "47", false],
    // kinds do not collide: client:alice@… is not user:alice@…
    [{ id: "client:alice@korral.example" }, "read", "47", false],
  ] as const)("%o %s at store %s: allowed %s", (who, action, store, allowed) => {
    const decision = policy.may(who, action, store);
    expect(decision.allowed).toBe(allowed);
    expect(decision.verdict).toBe(allowed ? "granted" : "refused");
  });

  it("compares e-mail addresses without case, as the principal's canonical form does", () => {
    expect(policy.may({ id: "user:Alice@KORRAL.example" }, "order", "47").allowed).toBe(true);
    const document = structuredClone(EXAMPLE);
    document.principals = { "user:ALICE@korral.example": ["dairy-south"] };
    expect(policyOf(document).may(alice, "order", "47").allowed).toBe(true);
  });

  it("says why: the principal, the action, the store and the granting group", () => {
    const granted = policy.may(alice, "order", "47");
    expect(granted).toEqual({
      verdict: "granted",
      allowed: true,
      groups: ["dairy-south"],
      reason: "user:alice@korral.example may order for store 47 (group dairy-south)",
    });
    expect(policy.may(alice, "read", "102").reason).toBe(
      "user:alice@korral.example may not read store 102: none of their groups (dairy-south) grants it",
    );
    expect(policy.may({ id: "user:bob@korral.example" }, "read", "47").reason).toBe(
      "user:bob@korral.example may not read store 47: the policy gives them no group",
    );
  });

  it("refuses a caller whose id is not a principal, without quoting it", () => {
    const decision = policy.may({ id: "user:alice@korral.example extra" }, "read", "47");
    expect(decision.allowed).toBe(false);
    expect(decision.reason).not.toContain("extra");
  });

  it('refuses an invalid store id even under a "*" grant, without quoting it', () => {
    const decision = policy.may(reporting, "read", "../47");
    expect(decision.allowed).toBe(false);
    expect(decision.reason).not.toContain("../47");
  });
});

describe("groups from several places", () => {
  const document: PolicyDocument = {
    version: 1,
    groups: {
      "dairy-south": { read: { stores: ["47"] }, order: { stores: ["47"] } },
      "prague-read": { read: { stores: ["102"] } },
    },
    principals: { "user:alice@korral.example": ["dairy-south", "prague-read"] },
    idp_groups: { "Korral Dairy Buyers": ["dairy-south"] },
  };
  const policy = policyOf(document);

  it("a principal in two groups has both grants", () => {
    expect(policy.may(alice, "read", "47").allowed).toBe(true);
    expect(policy.may(alice, "read", "102").allowed).toBe(true);
    expect(policy.may(alice, "order", "102").allowed).toBe(false);
  });

  it("an IdP group from the token's claim grants its policy groups to a principal not named", () => {
    const carol = { id: "user:carol@korral.example", idpGroups: ["Korral Dairy Buyers"] };
    expect(policy.may(carol, "order", "47")).toMatchObject({
      allowed: true,
      groups: ["dairy-south"],
    });
    expect(policy.may({ ...carol, idpGroups: ["Other"] }, "order", "47").allowed).toBe(false);
    expect(policy.may({ id: carol.id }, "order", "47").allowed).toBe(false);
  });

  it("a subject's groups, once found, are never another subject's (ids and claims that spell each other)", () => {
    const fresh = policyOf(document);
    const carol = { id: "user:carol@korral.example", idpGroups: ["Korral Dairy Buyers"] };
    expect(fresh.may(carol, "order", "47").allowed).toBe(true);
    // Each asked after the granted subject, as a cache keyed by joined text would answer them.
    for (const impostor of [
      { id: `${carol.id}\nKorral Dairy Buyers` },
      { id: `${carol.id}\nKorral Dairy Buyers`, idpGroups: [] },
      { id: carol.id, idpGroups: ["Korral Dairy", "Buyers"] },
      { id: `${carol.id}Korral Dairy Buyers` },
      { id: `${carol.id.length}:${carol.id}19:Korral Dairy Buyers` },
    ]) {
      expect(fresh.may(impostor, "order", "47").allowed).toBe(false);
    }
    // And the granted one is still granted, after them and again.
    expect(fresh.may({ ...carol }, "order", "47").allowed).toBe(true);
    expect(fresh.may({ id: "user:alice@korral.example" }, "read", "102").allowed).toBe(true);
  });

  it("mode defaults to enforce when the document leaves it out", () => {
    expect(policy.mode).toBe("enforce");
    expect(policy.may({ id: "user:bob@korral.example" }, "read", "47").verdict).toBe("refused");
  });
});

describe("categories beside stores", () => {
  const policy = policyOf({
    version: 1,
    groups: {
      dairy: { order: { stores: "*", categories: ["Dairy"] } },
      everything: { order: { stores: ["102"], categories: "*" } },
    },
    principals: {
      "user:alice@korral.example": ["dairy"],
      "user:bob@korral.example": ["everything"],
    },
  });

  it("a grant limited to categories covers a call naming one of them (without case)", () => {
    expect(policy.may(alice, "order", "47", "Dairy").allowed).toBe(true);
    expect(policy.may(alice, "order", "47", " dairy ").allowed).toBe(true);
    expect(policy.may(alice, "order", "47", "Bakery").allowed).toBe(false);
  });

  it("a call naming no category is covered only by grants for every category", () => {
    expect(policy.may(alice, "order", "47").allowed).toBe(false);
    expect(policy.may({ id: "user:bob@korral.example" }, "order", "102").allowed).toBe(true);
    expect(policy.may({ id: "user:bob@korral.example" }, "order", "102", "Bakery").allowed).toBe(
      true,
    );
  });
});

describe("shadow mode", () => {
  const policy = policyOf({ ...EXAMPLE, mode: "shadow" });

  it("never refuses, and reports what enforce would have refused", () => {
    const would = policy.may(alice, "read", "102");
    expect(would.allowed).toBe(true);
    expect(would.verdict).toBe("shadow");
    expect(would.reason).toBe(
      "shadow mode, not refused: user:alice@korral.example may not read store 102: none of their groups (dairy-south) grants it",
    );
    expect(policy.may({ id: "user:bob@korral.example" }, "order", "47").verdict).toBe("shadow");
  });

  it("a call the policy grants is granted, not shadow", () => {
    expect(policy.may(alice, "order", "47").verdict).toBe("granted");
  });

  it("gives no refusal to turn into an error", () => {
    expect(refusalOf(policy.may(alice, "order", "63"), alice, "order", "63")).toBeUndefined();
  });
});

describe("a policy that could not be read", () => {
  const policy = unavailablePolicy("policy file does not exist");

  it("allows nothing, and says why in the words of the source", () => {
    for (const action of ["read", "order"] as const) {
      const decision: Decision = policy.may(alice, action, "47");
      expect(decision).toEqual({
        verdict: "unavailable",
        allowed: false,
        reason: "store policy unavailable: policy file does not exist",
      });
    }
    expect(policy.mode).toBe("unavailable");
  });
});

describe("the errors a refusal becomes", () => {
  const policy = policyOf(EXAMPLE);

  it("a refused read: not_permitted for that store, not retryable, Ask Korral IT", () => {
    const error = refusalOf(policy.may(alice, "read", "102"), alice, "read", "102");
    expect(error?.toBody()).toEqual({
      type: "not_permitted",
      message:
        "Store 102 is not among the stores user:alice@korral.example may read. Ask Korral IT for access.",
      next_step:
        "Tell the buyer they have no access to store 102; Korral IT can grant it. Other stores are unaffected.",
      retryable: false,
    });
  });

  it("a refused order: not_permitted, nothing submitted, not retryable", () => {
    const body = refusalOf(policy.may(alice, "order", "63"), alice, "order", "63")?.toBody();
    expect(body?.type).toBe("not_permitted");
    expect(body?.message).toBe(
      "user:alice@korral.example may not order for store 63; nothing was submitted. Ask Korral IT for access.",
    );
    expect(body?.retryable).toBe(false);
  });

  it("an unavailable policy: policy_unavailable, retryable, for reads and writes", () => {
    const down = unavailablePolicy("policy secret is empty");
    for (const action of ["read", "order"] as const) {
      const body = refusalOf(down.may(alice, action, "47"), alice, action, "47")?.toBody();
      expect(body?.type).toBe("policy_unavailable");
      expect(body?.retryable).toBe(true);
      // The source's problem is for operators, not the model.
      expect(body?.message).not.toContain("secret");
    }
  });

  it("a granted call gives none", () => {
    expect(refusalOf(policy.may(alice, "read", "47"), alice, "read", "47")).toBeUndefined();
  });

  it("both types are documented error types", () => {
    expect(ERROR_TYPES).toEqual(expect.arrayContaining(["not_permitted", "policy_unavailable"]));
  });
});

describe("the shape, refused strictly", () => {
  const valid = JSON.stringify(EXAMPLE);

  it("the issue's example, and the example in docs, are valid", () => {
    expect("policy" in parsePolicy(valid)).toBe(true);
    const docExample = readFileSync(
      join(import.meta.dirname, "../../docs/policy.example.json"),
      "utf8",
    );
    expect(parsePolicy(docExample)).toHaveProperty("policy");
  });

  it("reads past a UTF-8 byte-order mark", () => {
    expect("policy" in parsePolicy(`\uFEFF${valid}`)).toBe(true);
  });

  it.each<[string, unknown, RegExp]>([
    ["another version", { ...EXAMPLE, version: 2 }, /^not a store policy: version: must be 1$/],
    ["no version", { ...EXAMPLE, version: undefined }, /version: must be 1/],
    ["an unknown mode", { ...EXAMPLE, mode: "audit" }, /mode: .*"enforce"\|"shadow"/],
    [
      "an unknown top-level field",
      { ...EXAMPLE, principles: {} },
      /the document: a field not in the documented shape/,
    ],
    [
      "an unknown field in a group",
      {
        ...EXAMPLE,
        groups: { g: { read: { stores: "*" }, write: { stores: "*" } } },
        principals: {},
      },
      /groups\.g: a field not in the documented shape/,
    ],
    [
      "an unknown field in a grant",
      { ...EXAMPLE, groups: { g: { read: { stores: "*", skus: ["1"] } } }, principals: {} },
      /groups\.g\.read: a field not in the documented shape/,
    ],
    [
      "a store id outside the id rule",
      { ...EXAMPLE, groups: { g: { read: { stores: ["47", "4 7"] } } }, principals: {} },
      /groups\.g\.read\.stores\[1\]: a store id is letters, digits/,
    ],
    [
      "a store id of a dot segment",
      { ...EXAMPLE, groups: { g: { read: { stores: [".."] } } }, principals: {} },
      /stores\[0\]: a store id/,
    ],
    [
      'stores neither "*" nor a list',
      { ...EXAMPLE, groups: { g: { read: { stores: "all" } } }, principals: {} },
      /groups\.g\.read\.stores: /,
    ],
    [
      "a grant without stores",
      { ...EXAMPLE, groups: { g: { read: {} } }, principals: {} },
      /groups\.g\.read\.stores/,
    ],
    [
      "a principal naming a group that does not exist",
      { ...EXAMPLE, principals: { "user:alice@korral.example": ["dairy-nort"] } },
      /principals\.user:alice@korral\.example\[0\]: names no group of groups/,
    ],
    [
      "a principal of no known kind",
      { ...EXAMPLE, principals: { "alice@korral.example": ["dairy-south"] } },
      /principals\.\(a key\): a principal starts with user:, svc:, client:, os:, local:/,
    ],
    [
      "the same principal twice (case aside)",
      {
        ...EXAMPLE,
        principals: {
          "user:alice@korral.example": ["all-read"],
          "user:Alice@korral.example": ["dairy-south"],
        },
      },
      /names a principal listed already/,
    ],
    [
      "a bad group name",
      { ...EXAMPLE, groups: { ...EXAMPLE.groups, "dairy south": { read: { stores: "*" } } } },
      /groups\.\(a key\): a group name is/,
    ],
    [
      "an IdP group naming a group that does not exist",
      { ...EXAMPLE, idp_groups: { buyers: ["nope"] } },
      /idp_groups\.buyers\[0\]: names no group of groups/,
    ],
    ["a list as the document", [EXAMPLE], /the document: .*expected object/],
  ])("refuses %s", (_name, document, problem) => {
    expect(problemOf(JSON.stringify(document))).toMatch(problem);
  });

  it("refuses a __proto__ key (it would become a prototype, not an entry)", () => {
    const text = valid.replace('"principals":{', '"principals":{"__proto__":["all-read"],');
    expect(problemOf(text)).toBe("not a store policy: it has a key named __proto__");
  });

  it("refuses text that is not JSON, without the parser's quote of it", () => {
    expect(problemOf('{"version": 1, "groups": SECRET-CANARY')).toBe("not valid JSON");
  });

  it("never quotes a value, an unknown field or a key that failed its check", () => {
    const canary = "slk_CANARY_9f8e7d";
    const documents = [
      { ...EXAMPLE, [canary]: 1 },
      { ...EXAMPLE, mode: canary },
      { ...EXAMPLE, version: canary },
      { ...EXAMPLE, principals: { [canary]: ["all-read"] } },
      { ...EXAMPLE, principals: { [`user:${canary}`]: ["all-read"] } },
      { ...EXAMPLE, groups: { [`${canary} x`]: { read: { stores: "*" } } } },
      { ...EXAMPLE, groups: { g: { read: { stores: [`${canary}/x`] } } } },
      { ...EXAMPLE, groups: { g: { read: { stores: "*", [canary]: 1 } } } },
      { ...EXAMPLE, principals: { "user:alice@korral.example": [canary] } },
      { "47": canary, "63": canary },
    ];
    for (const document of documents) {
      const problem = problemOf(JSON.stringify(document));
      expect(problem).toMatch(/^not a store policy: /);
      expect(problem).not.toContain(canary);
    }
  });

  it("says at most three problems, and how many more there are", () => {
    const problem = problemOf(
      JSON.stringify({
        ...EXAMPLE,
        groups: { g: { read: { stores: ["a.", "b.", "c.", "d.", "e."] } } },
        principals: {},
      }),
    );
    expect(problem.match(/a store id is/g)).toHaveLength(3);
    expect(problem).toMatch(/\(and 2 more\)$/);
  });
});
