// Each running test bed takes its own /16 of loopback addresses for its pods (127.N.0.0/16, N from
// 1 up), so that two test beds on one machine (a test starting a second one, or `npm run testbed`
// beside a test run) never hand out the same pod address. A lock file per range names the owning
// process; a range whose owner is gone is taken over.
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { holdPidFile } from './pid-file.ts';

const LOCKS = join(tmpdir(), 'queen-testbed-ranges');

export interface IpRange {
  /** The second octet: pods get 127.<octet>.x.y. */
  octet: number;
  release(): void;
}

export function claimIpRange(owner: string): IpRange {
  mkdirSync(LOCKS, { recursive: true });
  for (let octet = 1; octet < 100; octet++) {
    const hold = holdPidFile(join(LOCKS, `127.${octet}`), owner);
    if ('release' in hold) return { octet, release: hold.release };
  }
  throw new Error(`no free pod address range: every 127.N.0.0/16 (N < 100) is held by a running test bed (${LOCKS})`);
}
