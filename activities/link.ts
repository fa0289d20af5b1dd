// The broker client's part for the cluster link (test/sim/LINK.md): a node's link status, and a
// standby's promotion. Any node takes a promotion (a follower forwards it to the leader).
import { brokerCall, brokerCallError, type BrokerToken } from './broker.ts';
import { brokerCallFailures } from '../metrics.ts';
import { parseLinkStatus, type LinkObservation } from '../plan/link.ts';

/** GET /api/v1/system/link of one node; null when it does not answer. */
export async function readLink(base: string, via: number, token?: BrokerToken, timeoutMs = 3000): Promise<LinkObservation | null> {
  try {
    const a = await brokerCall(`${base}/api/v1/system/link`, 'GET', timeoutMs, undefined, token);
    if (a.status !== 200) brokerCallFailures.inc({ call: 'link', kind: `http_${a.status}` });
    return a.status === 200 ? parseLinkStatus(via, a.json) : null;
  } catch {
    brokerCallFailures.inc({ call: 'link', kind: 'error' });
    return null;
  }
}

export type PromoteResult =
  | { ok: true; link: LinkObservation }
  /** `notStandby`: the cluster never was one (409 not_standby); otherwise worth asking again. */
  | { ok: false; notStandby: boolean; error: string };

/** POST /api/v1/system/link/promote through one node. */
export async function promoteLink(base: string, via: number, token?: BrokerToken, timeoutMs = 30_000): Promise<PromoteResult> {
  try {
    const a = await brokerCall(`${base}/api/v1/system/link/promote`, 'POST', timeoutMs, {}, token);
    const link = a.status === 200 ? parseLinkStatus(via, a.json) : null;
    if (link) return { ok: true, link };
    const j = a.json as { code?: unknown; error?: unknown } | undefined;
    return { ok: false, notStandby: a.status === 409 && j?.code === 'not_standby', error: `pod ${via} answered ${a.status}: ${typeof j?.error === 'string' ? j.error : a.body.slice(0, 200)}` };
  } catch (err) {
    return { ok: false, notStandby: false, error: `pod ${via}: ${brokerCallError(err, timeoutMs)}` };
  }
}
