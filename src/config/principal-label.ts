/**
 * A KORRAL_PRINCIPAL label: the stdio buyer's own name for themselves, `local:<label>` as a
 * principal (policy/principal.ts). Checked once, at start, by the configuration.
 */

/** The rule for a KORRAL_PRINCIPAL label, in words (for configuration errors). */
export const LABEL_RULE =
  "1 to 64 characters of letters, digits, . _ @ + and -, starting with a letter or digit";
export const LABEL = /^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$/;

/** Why `label` cannot be a KORRAL_PRINCIPAL, or undefined (the check config.ts runs). */
export function labelProblem(label: string): string | undefined {
  return LABEL.test(label) ? undefined : `must be ${LABEL_RULE} (it becomes local:<label>)`;
}
