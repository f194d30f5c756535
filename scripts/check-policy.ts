// Checks a store policy file with the server's own reader and parser (docs/identity.md): prints
// `ok (<mode>)`, or the problem and exits 1. Never prints the file's content.
//
// Usage: npx tsx scripts/check-policy.ts <policy file>
import { readPolicyFile } from "../src/policy/policy-source.js";
import { parsePolicy } from "../src/policy/store-policy.js";

const path = process.argv[2];
if (path === undefined) {
  console.error("usage: npx tsx scripts/check-policy.ts <policy file>");
  process.exit(2);
}
const read = await readPolicyFile(path);
const parsed = "text" in read ? parsePolicy(read.text) : { problem: read.failure };
if ("problem" in parsed) {
  console.error(parsed.problem);
  process.exit(1);
}
process.stdout.write(`ok (${parsed.policy.mode})\n`);
