// The scenarios that put the most load on the test bed: 200 messages a second or more through the
// client Service for minutes (issue 14), most of them through a store of about 200 MB. Three of
// them side by side on two cores starved each other's load client and simulators (pushes sent
// 1.9 s late, an upgrade of five voters past its 10 minutes), so they hold one slot: at most one
// runs at a time (harness.ts, scenario()), and the sequencer (test/sequencer.ts) orders the files
// so that the next one is due as the last ends, with the other scenarios beside it. A file holds the
// slot from its first scenario to its end (test/e2e/setup.ts gives it back): held per scenario, the
// slot went to another heavy file between two tests of one, whose worker then waited idle for it
// (replace's third scenario waited 124 s in one run), which the sequencer's plan, made per file,
// cannot foresee.
import { closeSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { pidAlive } from '../identity.ts';

export const HEAVY_FILES: ReadonlySet<string> = new Set([
  'test/e2e/grow.test.ts',
  'test/e2e/replace.test.ts',
  'test/e2e/upgrade-five.test.ts',
  'test/e2e/scale.test.ts',
  'test/e2e/upgrade.test.ts',
  'test/e2e/removal-gate.test.ts',
]);

const POLL_MS = 500;

/**
 * Takes the test bed's heavy slot (a file in its folder, created exclusively, naming this process):
 * waits while another live process holds it. Returns what gives it back and the time waited.
 */
export async function takeHeavySlot(dir: string, holder: string): Promise<{ release: () => void; waitedMs: number }> {
  const file = join(dir, 'heavy-slot');
  const mine = `${process.pid} ${holder}`;
  const began = Date.now();
  for (;;) {
    try {
      const fd = openSync(file, 'wx');
      writeSync(fd, mine);
      closeSync(fd);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    let held = '';
    try {
      held = readFileSync(file, 'utf8');
    } catch {
      continue; // given back meanwhile
    }
    const pid = Number(held.split(' ')[0]);
    // A holder that died without giving it back (a worker killed at a timeout) holds nothing, nor
    // does a scenario of this process that never closed (a process runs one scenario at a time).
    if (held && (pid === process.pid || !(pid > 0 && pidAlive(pid)))) rmSync(file, { force: true });
    else await new Promise((r) => setTimeout(r, POLL_MS));
  }
  const release = () => {
    try {
      if (readFileSync(file, 'utf8') === mine) rmSync(file, { force: true });
    } catch {
      // gone already
    }
  };
  return { release, waitedMs: Date.now() - began };
}

/** The slot as this process holds it for its test file: one take for all of the file's scenarios. */
let heldForFile: { file: string; release: () => void } | null = null;

/**
 * Takes the heavy slot for the test file `file` unless this process holds it for that file already.
 * Returns the time waited (0 when held already); giveBackFileSlot() gives it back.
 */
export async function holdHeavySlotForFile(dir: string, file: string, holder: string): Promise<{ waitedMs: number }> {
  if (heldForFile?.file === file) return { waitedMs: 0 };
  giveBackFileSlot();
  const slot = await takeHeavySlot(dir, holder);
  heldForFile = { file, release: slot.release };
  return { waitedMs: slot.waitedMs };
}

/** Gives back the slot held for a test file (at the file's end), if any. */
export function giveBackFileSlot(): void {
  heldForFile?.release();
  heldForFile = null;
}
