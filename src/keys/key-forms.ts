/**
 * Every form a careless (or hostile) echo of a key takes in text: as sent, JSON- and
 * percent-escaped (encodeURIComponent, and every byte as %XX), hex, and base64 and base64url with
 * the key at each of the three byte offsets inside a longer encoded blob. For base64 only the
 * characters made of the key's bits alone are a form: the ones at either end mix with unknown
 * neighbouring bytes. Forms are matched ignoring case (an echo may upper-case hex or escapes).
 */
export function keyForms(value: string): string[] {
  const bytes = Buffer.from(value, "utf8");
  const hex = bytes.toString("hex");
  const forms = new Set<string>([
    value,
    JSON.stringify(value).slice(1, -1),
    encodeURIComponent(value),
    hex.replace(/../g, "%$&"),
    hex,
  ]);
  for (let offset = 0; offset < 3; offset += 1) {
    const shifted = Buffer.concat([Buffer.alloc(offset), bytes]);
    // Character i holds bits [6i, 6i+6): it is the key's alone when those lie within its bytes.
    const first = Math.ceil((8 * offset) / 6);
    const end = Math.floor((8 * (offset + bytes.length)) / 6);
    for (const encoding of ["base64", "base64url"] as const) {
      forms.add(shifted.toString(encoding).slice(first, end));
    }
  }
  // Longest first, so an alternation takes the whole echo rather than a shorter form inside it.
  return [...forms].filter((form) => form.length >= 4).sort((a, b) => b.length - a.length);
}

const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** One case-insensitive pattern matching any of `forms` (literals only: linear in the text). */
export function formsPattern(forms: readonly string[]): RegExp | undefined {
  return forms.length === 0 ? undefined : new RegExp(forms.map(escapeRegExp).join("|"), "gi");
}
