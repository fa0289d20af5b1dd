// What the link's scenarios share (standby, promote, switchover): the link token's Secret, a
// source with spec.link, a standby of it, and the wait for the standby to follow.
import { formed, seedSpec, waitForCluster, type Scenario } from './harness.ts';

export const LINK_SECRET = { name: 'link', key: 'token' };

/** The Secret of the link token, and a source with spec.link. */
export async function formSource(sc: Scenario, token = 'l'.repeat(48)) {
  await sc.core.createNamespacedSecret({ namespace: sc.ns, body: { metadata: { name: LINK_SECRET.name }, stringData: { [LINK_SECRET.key]: token } } });
  return formed(sc, seedSpec({ link: { tokenSecret: LINK_SECRET } }));
}

export const standbySpec = (over: Record<string, unknown> = {}) =>
  seedSpec({ standby: { source: { cluster: { name: 'queen' } }, tokenSecret: LINK_SECRET, ...over } as never });

/** Until the standby rests in phase Standby with its three voters, following. */
export function standbyFollowing(sc: Scenario, name = 'dr') {
  return waitForCluster(
    sc,
    'the standby following its source',
    (q) => q.status?.phase === 'Standby' && JSON.stringify(q.status?.voters) === '[1,2,3]' && q.status?.standby?.state === 'following',
    300_000,
    name,
  );
}

