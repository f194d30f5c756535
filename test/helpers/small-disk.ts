import { appendFileSync, mkdtempSync, rmSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect } from "vitest";
import { runSyncOk } from "./spawn.js";

/**
 * A full disk, for real: a small tmpfs mounted for the test (root only), filled to the last byte
 * and emptied again. Each file using it unmounts its disks after every test.
 */

export function canMount(): boolean {
  if (process.getuid?.() !== 0) return false;
  const probe = mkdtempSync(join(tmpdir(), "korral-mount-probe-"));
  try {
    runSyncOk("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", probe], { stdio: "ignore" });
    runSyncOk("umount", [probe], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  } finally {
    rmSync(probe, { recursive: true, force: true });
  }
}

const mounts: string[] = [];
afterEach(() => {
  for (const dir of mounts.splice(0)) {
    try {
      runSyncOk("umount", ["-l", dir], { stdio: "ignore" });
    } catch {}
    rmSync(dir, { recursive: true, force: true });
  }
});

/** A 256 kB file system of its own, and a way to fill it to the last byte and empty it again. */
export function smallDisk() {
  const dir = mkdtempSync(join(tmpdir(), "korral-full-disk-"));
  runSyncOk("mount", ["-t", "tmpfs", "-o", "size=256k", "tmpfs", dir]);
  mounts.push(dir);
  const filler = join(dir, "filler");
  return {
    dir,
    fill() {
      const page = Buffer.alloc(4096, 0x2e);
      try {
        for (;;) appendFileSync(filler, page);
      } catch (error) {
        expect((error as NodeJS.ErrnoException).code).toBe("ENOSPC");
      }
    },
    free: () => unlinkSync(filler),
  };
}
