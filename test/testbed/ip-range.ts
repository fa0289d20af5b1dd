// Each running test bed takes its own /16 of loopback addresses for its pods (127.N.0.0/16, N from
// 1 up), so that two test beds on one machine (a test starting a second one, or `npm run testbed`
// beside a test run) never hand out the same pod address. A lock file per range names the owning
// process; a range whose owner is gone is taken over.
import { mkdirSync, openSync, closeSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isAlive } from './procs.ts';

const LOCKS = join(tmpdir(), 'queen-testbed-ranges');

export interface IpRange {
  /** The second octet: pods get 127.<octet>.x.y. */
  octet: number;
  release(): void;
}

export function claimIpRange(owner: string): IpRange {
  mkdirSync(LOCKS, { recursive: true });
  for (let octet = 1; octet < 100; octet++) {
    const path = join(LOCKS, `127.${octet}`);
    for (let tries = 0; tries < 2; tries++) {
      try {
        const fd = openSync(path, 'wx');
        writeSync(fd, `${process.pid} ${owner}\n`);
        closeSync(fd);
        return { octet, release: () => rmSync(path, { force: true }) };
      } catch {
        let pid = 0;
        try {
          pid = Number(readFileSync(path, 'utf8').split(' ')[0]);
        } catch {
          continue; // just released: try again
        }
        if (pid > 0 && isAlive(pid)) break; // taken
        rmSync(path, { force: true }); // its owner is gone
      }
    }
  }
  throw new Error(`no free pod address range: every 127.N.0.0/16 (N < 100) is held by a running test bed (${LOCKS})`);
}
