import { describe, expect, it } from "vitest";
import { InflightCall, InflightCalls } from "../../src/lifecycle/inflight.js";
import { callRecord, unverifiedOrigin } from "../../src/logging/call-record.js";
import { MemoryRecorder } from "../helpers/harness.js";

const ORDER = { store_id: "47", sku: "8847291", quantity: 24, reason: "r" };

/** A running call of `tool`: a write audits when abandoned, a read only traces. */
function running(recorder: MemoryRecorder, name: string, write = false): InflightCall {
  const call = callRecord(
    unverifiedOrigin("local:test", "test"),
    name,
    write ? "create_replenishment_order" : "get_stock_position",
    write ? ORDER : { sku: "8847291", store_ids: ["47"] },
    new AbortController().signal,
  );
  return new InflightCall(call, write, recorder);
}

/** What each call links to: a finished call must link to none (see InflightCalls). */
const links = (call: InflightCall) => [
  call.listPrev?.call.requestId,
  call.listNext?.call.requestId,
];

describe("the in-flight registry's list", () => {
  it("keeps count through ends in any order, and a finished call links to no other", () => {
    const recorder = new MemoryRecorder();
    const calls = new InflightCalls();
    const [a, b, c, d] = ["a", "b", "c", "d"].map((id) => running(recorder, id)) as [
      InflightCall,
      InflightCall,
      InflightCall,
      InflightCall,
    ];
    for (const call of [a, b, c, d]) calls.begin(call);
    calls.begin(b); // again: still one entry
    expect(calls.size).toBe(4);

    calls.end(c); // from the middle
    expect(links(c)).toEqual([undefined, undefined]);
    expect(links(b)).toEqual([a.call.requestId, d.call.requestId]);
    expect(links(d)).toEqual([b.call.requestId, undefined]);
    calls.end(d); // the newest
    calls.end(a); // the oldest
    calls.end(a); // again: nothing
    expect(calls.size).toBe(1);
    for (const call of [a, c, d]) expect(links(call)).toEqual([undefined, undefined]);
    expect(links(b)).toEqual([undefined, undefined]);

    calls.end(b);
    expect(calls.size).toBe(0);
    expect(links(b)).toEqual([undefined, undefined]);
    expect(calls.abandonAll()).toBe(0);
    expect(recorder.traces).toEqual([]);
  });

  it("abandons exactly the calls still running, once each, and lets them end later", async () => {
    const recorder = new MemoryRecorder();
    const calls = new InflightCalls();
    const read = running(recorder, "read");
    const done = running(recorder, "done", true);
    const write = running(recorder, "write", true);
    const later = running(recorder, "later");
    for (const call of [read, done, write, later]) calls.begin(call);
    calls.end(done);
    let idle = false;
    void calls.whenIdle().then(() => {
      idle = true;
    });

    expect(calls.abandonAll()).toBe(1);
    expect(calls.size).toBe(0);
    // Oldest first, as they began.
    expect(recorder.traces.map((t) => t.request_id)).toEqual(["read", "write", "later"]);
    expect(recorder.audits.map((a) => [a.request_id, a.outcome])).toEqual([["write", "REJECTED"]]);
    for (const call of [read, done, write, later]) {
      expect(links(call)).toEqual([undefined, undefined]);
    }
    expect(calls.abandonAll()).toBe(0);

    // An abandoned call that returns after all: nothing to remove, and the stop's wait ends.
    await Promise.resolve();
    expect(idle).toBe(false);
    calls.end(write);
    await Promise.resolve();
    expect(idle).toBe(true);
    expect(calls.size).toBe(0);
  });
});
