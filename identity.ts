// Who this process is to Temporal: the identity its worker polls with and that each activity
// attempt it takes is recorded under (`<pid>@<pod or host name>/<process token>`). The token tells this
// process from an earlier one of the same pod: in a container the operator is PID 1 again after a
// restart, with the same host name (the pod's).
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';

export interface ProcessIdentity {
  pid: number;
  host: string;
  token: string;
}

export function parseIdentity(identity: string): ProcessIdentity | null {
  const m = /^(\d+)@(.+)\/([0-9a-f]{8})$/.exec(identity);
  return m ? { pid: Number(m[1]), host: m[2]!, token: m[3]! } : null;
}

export const formatIdentity = (id: ProcessIdentity): string => `${id.pid}@${id.host}/${id.token}`;

/**
 * This process. Its host is the pod's name where the Deployment gives it (POD_NAME): with
 * hostNetwork the host name is the node's, which two operator pods on one node share, each its
 * own PID 1.
 */
export const PROCESS: ProcessIdentity = { pid: process.pid, host: process.env.POD_NAME || hostname(), token: randomBytes(4).toString('hex') };

/** Whether a process of this machine (or this pod: the same PID space) runs with that pid. */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Whether an activity attempt recorded under `identity` was taken by a process of this host that
 * is gone (an earlier process of this pod, e.g. before its container restarted): that attempt will
 * never complete or heartbeat, and waiting out its heartbeat timeout only delays the retry. Never
 * for another host (its process may be alive and cut off), this process, or a pid that runs.
 */
export function heldByGoneProcess(identity: string | null | undefined, mine: ProcessIdentity, alive: (pid: number) => boolean = pidAlive): boolean {
  const other = identity ? parseIdentity(identity) : null;
  if (!other || other.host !== mine.host || other.token === mine.token) return false;
  // The same pid with another token is an earlier process (a restarted container's PID 1).
  return other.pid === mine.pid || !alive(other.pid);
}
