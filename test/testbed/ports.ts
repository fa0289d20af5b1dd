// Loopback ports for the test bed's servers (etcd, the API server, Temporal, health ports).
//
// A port found by listening on port 0 and closing is in the kernel's ephemeral range: between the
// close and the server's own bind, another test bed's server or any outgoing connection of this
// machine may take it (CI saw a kube-apiserver fail with "address already in use" when two test
// beds started side by side). So ports come from below the ephemeral range, where the kernel never
// hands out a port by itself, and each is reserved across processes by a lock file naming its
// owner, as the pod address ranges are (ip-range.ts). A reservation whose owner is gone is taken
// over; a server started again on its old port (the API server, Temporal) finds it still reserved.
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isAlive } from './procs.ts';

const LOCKS = join(tmpdir(), 'queen-testbed-ports');
const LOWEST = 20000;

function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    if (Number.isInteger(low) && low > LOWEST + 1000) return low;
  } catch {
    // not Linux: the IANA dynamic range starts at 49152
  }
  return 32768;
}

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen({ port, host: '127.0.0.1', exclusive: true }, () => s.close(() => resolve(true)));
  });
}

/** Takes the lock of one port: true when this process holds it now. */
function lock(port: number, owner: string): boolean {
  const path = join(LOCKS, String(port));
  for (let tries = 0; tries < 2; tries++) {
    try {
      const fd = openSync(path, 'wx');
      writeSync(fd, `${process.pid} ${owner}\n`);
      closeSync(fd);
      return true;
    } catch {
      let pid = 0;
      try {
        pid = Number(readFileSync(path, 'utf8').split(' ')[0]);
      } catch {
        continue; // just released: try again
      }
      if (pid > 0 && isAlive(pid)) return false;
      rmSync(path, { force: true }); // its owner is gone
    }
  }
  return false;
}

export function releasePorts(ports: number[]): void {
  for (const port of ports) {
    const path = join(LOCKS, String(port));
    try {
      if (Number(readFileSync(path, 'utf8').split(' ')[0]) === process.pid) rmSync(path, { force: true });
    } catch {
      // not held
    }
  }
}

/**
 * n loopback ports that no other test bed holds and nothing listens on, reserved for this process
 * until releasePorts (or until it exits). owner says who holds them, for a person reading the locks.
 */
export async function freePorts(n: number, owner = 'test'): Promise<number[]> {
  mkdirSync(LOCKS, { recursive: true });
  const high = ephemeralLow();
  const span = high - LOWEST;
  const ports: number[] = [];
  let candidate = LOWEST + Math.floor(Math.random() * span);
  for (let looked = 0; ports.length < n; looked++) {
    if (looked >= span) {
      releasePorts(ports);
      throw new Error(`no free loopback port between ${LOWEST} and ${high} (locks in ${LOCKS})`);
    }
    candidate = LOWEST + ((candidate - LOWEST + 1) % span);
    if (!lock(candidate, owner)) continue;
    if (await canBind(candidate)) ports.push(candidate);
    else releasePorts([candidate]);
  }
  return ports;
}
