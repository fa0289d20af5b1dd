// A file that a live process holds: what keeps a test bed's folder, its range of pod addresses and a
// simulated cluster's subnet to one process of this machine at a time.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { pidAlive } from '../../identity.ts';

/** The files this process holds (each by its hold), released when it exits. */
const held = new Map<string, object>();
function releaseAll(): void {
  for (const path of held.keys()) rmSync(path, { force: true });
  held.clear();
}

/**
 * Takes `path` for this process: created exclusively, its first word this process's pid (then
 * `note`, if given). A file whose process is gone (it ended abruptly) is taken over. Released by
 * the returned function, or when this process exits; `heldBy` names the live process that holds it
 * (this one included).
 */
export function holdPidFile(path: string, note = ''): { release: () => void } | { heldBy: number } {
  for (let tries = 0; tries < 3; tries++) {
    try {
      writeFileSync(path, `${process.pid}${note ? ` ${note}` : ''}\n`, { flag: 'wx' });
      const hold = {};
      held.set(path, hold);
      if (held.size === 1) process.on('exit', releaseAll);
      return {
        release: () => {
          if (held.get(path) !== hold) return; // released already (and maybe held again since)
          held.delete(path);
          rmSync(path, { force: true });
          if (held.size === 0) process.off('exit', releaseAll);
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    let owner = 0;
    try {
      owner = Number(readFileSync(path, 'utf8').trim().split(/\s+/)[0]);
    } catch {
      continue; // released meanwhile
    }
    if (owner > 0 && pidAlive(owner)) return { heldBy: owner };
    rmSync(path, { force: true }); // its owner is gone
  }
  throw new Error(`could not take ${path}`);
}
