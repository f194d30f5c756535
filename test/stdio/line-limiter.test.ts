import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { LineLimiter } from "../../src/stdio/line-limiter.js";

/** Feeds `chunks` through a limiter; returns the lines it passed on and the oversize reports. */
async function run(chunks: (string | Buffer)[], maxBytes = 10) {
  const oversize: number[] = [];
  const limiter = new LineLimiter(maxBytes, (bytes) => oversize.push(bytes));
  const out: Buffer[] = [];
  limiter.on("data", (chunk: Buffer) => out.push(chunk));
  const ended = new Promise((resolve) => limiter.once("end", resolve));
  for (const chunk of chunks) limiter.write(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
  limiter.end();
  await ended;
  return { lines: out.map((b) => b.toString("utf8")), oversize };
}

describe("LineLimiter", () => {
  it("passes whole lines, one per chunk, whatever the chunking", async () => {
    expect((await run(["ab\ncd", "e\n", "f", "g", "\nh\n"])).lines).toEqual([
      "ab\n",
      "cde\n",
      "fg\n",
      "h\n",
    ]);
  });

  it("keeps CRLF for the SDK to strip, and skips empty lines and lone CRs", async () => {
    expect((await run(["a\r\n\n\r\n\nb\r", "\n"])).lines).toEqual(["a\r\n", "b\r\n"]);
  });

  it("keeps a multi-byte character split across chunks whole", async () => {
    const text = Buffer.from("é€😀\n");
    const { lines } = await run([text.subarray(0, 1), text.subarray(1, 4), text.subarray(4)], 20);
    expect(lines).toEqual(["é€😀\n"]);
  });

  it("accepts a line of exactly the limit and refuses one byte more, then goes on", async () => {
    const { lines, oversize } = await run(["0123456789\n01234", "567890\nok\n"]);
    expect(lines).toEqual(["0123456789\n", "ok\n"]);
    expect(oversize).toEqual([11]);
  });

  it("discards a long line as it streams, counting its bytes, and reports it once", async () => {
    const chunks = Array.from({ length: 50 }, () => "x".repeat(7));
    const { lines, oversize } = await run([...chunks, "\nafter\n"]);
    expect(lines).toEqual(["after\n"]);
    expect(oversize).toEqual([350]);
  });

  it("passes a last line without newline, and reports a long one cut by the end of input", async () => {
    expect((await run(["a\nlast"])).lines).toEqual(["a\n", "last\n"]);
    expect((await run(["a\n", "y".repeat(30)])).oversize).toEqual([30]);
  });
});

describe("LineLimiter, any input cut anywhere", () => {
  it("passes exactly the non-empty lines within the limit and reports each longer one", async () => {
    const lineArb = fc.oneof(
      fc.string({ unit: "grapheme", maxLength: 8 }),
      fc.constantFrom("", "\r", "é€😀", "x".repeat(16), "y".repeat(17), "\u2028ab\r"),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          lineArb.map((l) => l.replaceAll("\n", "")),
          { maxLength: 12 },
        ),
        fc.array(fc.nat({ max: 400 }), { maxLength: 10 }),
        fc.boolean(),
        async (lines, cuts, finalNewline) => {
          const text = lines.join("\n") + (finalNewline ? "\n" : "");
          const bytes = Buffer.from(text, "utf8");
          const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort(
            (a, b) => a - b,
          );
          // Cut at arbitrary byte offsets, inside multi-byte characters and CRLFs included.
          const pieces = [0, ...points].map((start, i, all) =>
            bytes.subarray(start, all[i + 1] ?? bytes.length),
          );
          const { lines: out, oversize } = await run(pieces, 16);
          const size = (l: string) => Buffer.byteLength(l, "utf8");
          const kept = lines.filter((l) => l !== "" && l !== "\r" && size(l) <= 16);
          expect(out).toEqual(kept.map((l) => `${l}\n`));
          expect(oversize).toEqual(lines.filter((l) => size(l) > 16).map(size));
        },
      ),
    );
  });
});
