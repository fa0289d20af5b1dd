// The chaos cells of the cluster link's operations (cell.ts runs them): the cluster under test,
// `queen`, is a standby of a source `src` formed beside it, and the operator is killed after each
// step of its promotion, or of a switchover to it. What a user sees decides, as for the others:
// the operation finishes, each step once in `kubectl describe`, no claim deleted but the source's
// (a switchover empties them), nothing acknowledged lost (the load client pushes through the
// standby's client Service, and for a switchover the source's too).
import type { QueenCluster } from '../../crd/schema.ts';
import { ANNOTATIONS } from '../../crd/schema.ts';
import { control } from '../testbed/client.ts';
import { startLoad } from '../testbed/load.ts';
import { annotate, createCluster, formed, getCluster, seedSpec, waitFor, waitForCluster, type Scenario } from '../e2e/harness.ts';
import { LINK_SECRET } from '../e2e/link-scenario.ts';
import type { OperationDef } from './cell.ts';

const ONCE: [number, number] = [1, 1];
const eachPod = (r: [number, number]) => Object.fromEntries([0, 1, 2].map((i) => [`queen-${i}`, r]));

/** The Events a seeded standby's formation leaves (FormCluster's own are counted by cell.ts). */
const FORMED_STANDBY = { StandbyFollows: ONCE, ScaleVotersStarted: ONCE, AddLearner: [2, 2] as [number, number], Promote: ONCE, ScaleVotersSucceeded: ONCE };

/** The step reasons of the link's operations, for cell.ts's count of each step's Events. */
export const LINK_STEP_REASONS = ['StandbyFollows', 'PromotePosition', 'Promoted', 'SwitchoverChecked', 'FenceSource', 'StandbyCaughtUp', 'StopSource', 'DemoteSource'];

/** A source `src` with spec.link, some history pushed to it, and its standby `queen` following. */
async function standbyOfSource(s: Scenario): Promise<QueenCluster> {
  await s.core.createNamespacedSecret({ namespace: s.ns, body: { metadata: { name: LINK_SECRET.name }, stringData: { [LINK_SECRET.key]: 'l'.repeat(48) } } });
  await formed(s, seedSpec({ link: { tokenSecret: LINK_SECRET } }), 'src');
  const history = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'src', rate: 50, queue: 'history' });
  await createCluster(s, seedSpec({ standby: { source: { cluster: { name: 'src' } }, tokenSecret: LINK_SECRET } }));
  const qc = await waitForCluster(s, 'the standby following', (q) => q.status?.phase === 'Standby' && JSON.stringify(q.status?.voters) === '[1,2,3]', 300_000);
  const report = await history.stop();
  if (report.unacknowledged.length) throw new Error(`the source's history was not all acknowledged: ${report.unacknowledged.length} left`);
  return qc;
}

export const LINK_CELLS: Record<'PromoteStandby' | 'Switchover', OperationDef> = {
  PromoteStandby: {
    workflow: 'promoteStandby',
    type: 'PromoteStandby',
    replicas: 3,
    history: 'promoteStandby',
    // Writes go to the standby: refused (503 standby) until it is promoted, then taken.
    cluster: async (s) => ({ qc: await standbyOfSource(s), service: 'queen' }),
    // The disaster: the standby has read the source's history, then every pod of the source dies.
    prepare: async (c) => {
      await waitFor('the standby caught up', async () => (await getCluster(c.s)).status?.standby?.lagEntries === 0, 60_000);
      for (const i of [0, 1, 2]) await control.kill(c.s.ns, `src-${i}`, { hold: true });
    },
    trigger: (c) => annotate(c.s, { [ANNOTATIONS.promote]: 'true' }),
    voters: [1, 2, 3],
    uids: () => eachPod(ONCE),
    claimsDeleted: () => [],
    events: () => ({ ...FORMED_STANDBY, PromoteStandbyStarted: ONCE, PromotePosition: ONCE, Promoted: ONCE, WriteCommitted: ONCE, PromoteStandbySucceeded: ONCE }),
    members: () => [],
  },
  Switchover: {
    workflow: 'switchover',
    type: 'Switchover',
    replicas: 3,
    history: 'switchover',
    // A client that keeps retrying and reaches both clusters' client Services.
    cluster: async (s) => ({ qc: await standbyOfSource(s), service: ['src', 'queen'] }),
    trigger: (c) => annotate(c.s, { [ANNOTATIONS.switchover]: 'true' }),
    voters: [1, 2, 3],
    uids: () => eachPod(ONCE),
    claimsDeleted: () => ['data-src-0', 'data-src-1', 'data-src-2'],
    events: () => ({
      ...FORMED_STANDBY,
      SwitchoverStarted: ONCE,
      SwitchoverChecked: ONCE,
      FenceSource: ONCE,
      StandbyCaughtUp: ONCE,
      StopSource: ONCE,
      PromotePosition: ONCE,
      Promoted: ONCE,
      WriteCommitted: ONCE,
      DemoteSource: ONCE,
      SwitchoverSucceeded: ONCE,
    }),
    members: () => [],
  },
};
