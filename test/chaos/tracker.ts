// What the chaos cells watch while an operation runs, from watches (every change, none missed
// between two samples): each pod's UIDs, each claim's UIDs and the ones deleted, the voters that
// are not Ready, and every pod deletion of a voter with the voters that were down at that moment.
// The operator is the only one that deletes a Queen pod (a restart, a replacement, a scale-down
// through the StatefulSet); a deletion while another voter was down is "two voters down by the
// operator's hand". A voter just promoted whose pod was not Ready yet (its readiness probe comes
// after the leader saw it caught up) is starting, not down, for a few probes. A pod whose containers
// all run and say ready while its Ready condition is false was marked so from outside its kubelet
// (the node-lifecycle controller, for a node whose Lease it saw go stale: a node stopped, or an
// API-server outage): the world's doing, so not counted as down, but listed in `marked`; a deletion while such
// a pod is not Ready still counts in `disruptions`. While an operation
// is expected to run (expectOperation), a status that says nothing for minutes (no message, or the
// same message with no named gate and not Blocked) is a silent wait: the chaos promise is that
// every operation ends or says why it waits.
import type { KubeConfig } from '@kubernetes/client-node';
import { GROUP, PLURAL, VERSION } from '../../crd/schema.ts';
import { readHealth } from '../../activities/broker.ts';
import { authOf } from '../testbed/load.ts';
import { Informer, Kube, type KObject } from '../testbed/kube.ts';

/** A voter's pod deleted (or gone) while another voter was not Ready. */
export interface Disruption {
  at: number;
  pod: string;
  /** The other voters' pods that were not Ready then (and since when, ms before). */
  othersDown: { pod: string; downForMs: number }[];
}

export interface Tracker {
  /** Each pod name's UIDs in the order seen. */
  podUids: Map<string, string[]>;
  /** Each claim name's UIDs in the order seen. */
  claimUids: Map<string, string[]>;
  /** UIDs of claims that got a deletion (deletionTimestamp or gone), in order. */
  deletedClaims: { name: string; uid: string; at: number }[];
  /** When each claim (UID) was gone from the API server. */
  claimGoneAt: Map<string, number>;
  /**
   * Every pod deletion (deletionTimestamp, or gone without one), voter or not: which, when, and
   * whether its broker said it led right then (asked at once: it hands leadership away only once
   * its kubelet stops it; null when it did not answer).
   */
  podDeletions: { pod: string; uid: string; at: number; led?: boolean | null }[];
  /** Every deletion of a voter's pod, with the other voters not Ready at that moment. */
  disruptions: Disruption[];
  /** The most voters not Ready at one time, but those a fault took down (exempt()). */
  maxVotersDown: number;
  /** Each time two or more voters were not Ready at once, but those a fault took down: when and which. */
  overDown: string[];
  /** Each time a voter's pod was marked not Ready from outside its kubelet: when and which (not in overDown). */
  marked: string[];
  /** Each silent wait: while an operation was expected, the status said nothing new for too long. */
  silences: string[];
  /** From now on an operation is expected (true) until it ended (false): its waits must say why. */
  expectOperation(on: boolean): void;
  /** `phase: message` of the QueenCluster in order, with the seconds since the start. */
  timeline: string[];
  /** The latest QueenCluster seen. */
  cluster(): any;
  /** Pods a fault took down on purpose are not counted against the operator until `untilMs`. */
  exempt(pod: string, untilMs: number): void;
  /** Ignores what happened so far (UIDs, deletions), from now on: the operation under test begins. */
  reset(): void;
  stop(): void;
}

/** Ready, and not being deleted. */
export const isReady = (p: any) => !p.metadata?.deletionTimestamp && !!p.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True');

/** Not Ready while every container runs and says ready, and not being deleted: marked from outside its kubelet. */
export const markedFromOutside = (p: any): boolean => {
  const containers = (p?.status?.containerStatuses ?? []) as { ready?: boolean; state?: { running?: unknown } }[];
  return !!p && !p.metadata?.deletionTimestamp && !isReady(p) && containers.length > 0 && containers.every((c) => c.ready && c.state?.running);
};

/** The port of a Queen node's HTTP API in the test bed's pods. */
export const BROKER_HTTP_PORT = 6632;

/** How long a voter just promoted may be not Ready yet without counting as down (a few readiness probes of 5 s). */
const NEW_VOTER_GRACE_MS = 15_000;

/** How long a status may say nothing new while an operation is expected (a few minutes). */
export const SILENT_MS = 180_000;

export async function track(kc: KubeConfig, namespace: string, name = 'queen', silentMs = SILENT_MS): Promise<Tracker> {
  const kube = new Kube(authOf(kc));
  const pods = new Informer<KObject>(kube, `/api/v1/namespaces/${namespace}/pods`, { query: { labelSelector: `app.kubernetes.io/instance=${name}` } });
  const claims = new Informer<KObject>(kube, `/api/v1/namespaces/${namespace}/persistentvolumeclaims`);
  const clusters = new Informer<KObject>(kube, `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${PLURAL}`);
  const began = Date.now();
  const notReadySince = new Map<string, number>();
  const exempted = new Map<string, number>();
  let lastLine = '';
  let downNow: string[] = [];
  let expecting = false;
  /** The status as a person reads it (phase, message, gate) and since when it has not changed. */
  let said = { key: '', since: Date.now(), reported: false };
  const t: Tracker = {
    podUids: new Map(),
    claimUids: new Map(),
    deletedClaims: [],
    claimGoneAt: new Map(),
    podDeletions: [],
    disruptions: [],
    maxVotersDown: 0,
    overDown: [],
    marked: [],
    silences: [],
    timeline: [],
    cluster: () => clusters.list().find((c) => c.metadata.name === name),
    // The later of two exemptions holds (a node's stop and its leader's failover overlap).
    exempt: (pod, untilMs) => exempted.set(pod, Math.max(untilMs, exempted.get(pod) ?? 0)),
    expectOperation(on) {
      expecting = on;
      said = { key: said.key, since: Date.now(), reported: false };
    },
    reset() {
      t.podUids.clear();
      t.claimUids.clear();
      t.deletedClaims.length = 0;
      t.claimGoneAt.clear();
      t.podDeletions.length = 0;
      t.disruptions.length = 0;
      t.maxVotersDown = 0;
      t.overDown.length = 0;
      t.marked.length = 0;
      t.silences.length = 0;
      downNow = [];
      markedNow = [];
      for (const p of pods.list()) see(t.podUids, p.metadata.name, p.metadata.uid!);
      for (const c of claims.list()) see(t.claimUids, c.metadata.name, c.metadata.uid!);
    },
    stop() {
      clearInterval(silenceTimer);
      pods.stop();
      claims.stop();
      clusters.stop();
      void kube.close();
    },
  };
  const see = (m: Map<string, string[]>, key: string, uid: string) => {
    const uids = m.get(key) ?? [];
    if (!uids.includes(uid)) uids.push(uid);
    m.set(key, uids);
  };
  const voterPods = (): string[] => ((t.cluster()?.status?.voters ?? []) as number[]).map((id) => `${name}-${id - 1}`);
  const podByName = (n: string) => pods.list().find((p) => p.metadata.name === n);
  /**
   * Since when each voter's pod has been a voter (in status), and whether it has been Ready since.
   * A learner is promoted once the leader sees it live and caught up, which is before its pod's
   * next readiness probe: for a probe's while after, a new voter that was never Ready is starting,
   * not down (the operator stops no pod meanwhile, which `disruptions` checks).
   */
  const voterSince = new Map<string, { at: number; readySince: boolean }>();
  const seeVoters = (now: number) => {
    const voters = voterPods();
    for (const v of [...voterSince.keys()]) if (!voters.includes(v)) voterSince.delete(v);
    for (const v of voters) {
      const since = voterSince.get(v) ?? { at: now, readySince: false };
      const p = podByName(v);
      if (p && isReady(p)) since.readySince = true;
      voterSince.set(v, since);
    }
  };
  const starting = (v: string, now: number) => {
    const since = voterSince.get(v);
    const p = podByName(v);
    return !!since && !since.readySince && now - since.at < NEW_VOTER_GRACE_MS && !!p && !p.metadata.deletionTimestamp;
  };
  /**
   * Voters whose pod is not Ready, but `except`; with `at`, not the ones a fault took down then,
   * nor new voters starting, nor pods marked not Ready from outside their kubelet.
   */
  const votersDown = (except: string | null, at: number | null) =>
    voterPods()
      .filter((v) => v !== except)
      .filter((v) => {
        const p = podByName(v);
        return !p || !isReady(p);
      })
      .filter((v) => at === null || ((exempted.get(v) ?? 0) < at && !starting(v, at) && !markedFromOutside(podByName(v))));
  let markedNow: string[] = [];
  const measure = () => {
    const now = Date.now();
    seeVoters(now);
    for (const p of pods.list()) {
      if (isReady(p)) notReadySince.delete(p.metadata.name);
      else if (!notReadySince.has(p.metadata.name)) notReadySince.set(p.metadata.name, now);
    }
    const down = votersDown(null, now);
    t.maxVotersDown = Math.max(t.maxVotersDown, down.length);
    const since = (v: string) => (notReadySince.has(v) ? ` since +${((notReadySince.get(v)! - began) / 1000).toFixed(1)}s` : '');
    const marked = voterPods().filter((v) => markedFromOutside(podByName(v)));
    if (marked.some((v) => !markedNow.includes(v))) t.marked.push(`+${((now - began) / 1000).toFixed(1)}s ${marked.map((v) => `${v}${since(v)}`).join(', ')}`);
    markedNow = marked;
    if (down.length > 1 && down.some((p) => !downNow.includes(p))) {
      // Which pods, how each is down, and the voters status had then: what the check rested on;
      // the order in which they went down tells whether a pod was stopped while another was down.
      const how = down.map((v) => {
        const p = podByName(v);
        return `${v} ${!p ? 'gone' : p.metadata.deletionTimestamp ? 'stopping' : 'not Ready'}${since(v)}`;
      });
      t.overDown.push(`+${((now - began) / 1000).toFixed(1)}s ${how.join(', ')} at once, status voters [${voterPods().join(', ')}] (${t.cluster()?.status?.message ?? ''})`);
    }
    downNow = down.length > 1 ? down : [];
  };
  /** Whether what the status says now tells a person why the operation waits. */
  const silence = () => {
    const st = t.cluster()?.status;
    const key = `${st?.phase ?? ''}|${st?.message ?? ''}|${st?.operation?.gate ?? ''}`;
    const now = Date.now();
    if (key !== said.key) said = { key, since: now, reported: false };
    if (!expecting || said.reported || now - said.since < silentMs) return;
    const quiet = !st?.message ? 'no message' : !st?.operation?.gate && st?.phase !== 'Blocked' ? `the same message with no named gate: "${st.message}"` : null;
    if (!quiet) return;
    said.reported = true;
    t.silences.push(`+${((now - began) / 1000).toFixed(1)}s for ${Math.round((now - said.since) / 1000)} s the status said ${quiet} (phase ${st?.phase ?? 'none'})`);
  };
  const silenceTimer = setInterval(silence, 5000);
  const deleted = (p: any) => {
    const pod = p.metadata.name as string;
    const deletion: Tracker['podDeletions'][number] = { pod, uid: p.metadata.uid, at: Date.now() };
    t.podDeletions.push(deletion);
    const ip = p.status?.podIP;
    if (ip) void readHealth(`http://${ip}:${BROKER_HTTP_PORT}`, 1000).then((h) => (deletion.led = h ? h.role === 'leader' : null));
    else deletion.led = null;
    if (!voterPods().includes(pod)) return;
    const now = Date.now();
    const othersDown = votersDown(pod, null).map((v) => ({ pod: v, downForMs: now - (notReadySince.get(v) ?? now) }));
    t.disruptions.push({ at: now, pod, othersDown });
  };
  pods.on({
    add: (p) => {
      see(t.podUids, p.metadata.name, p.metadata.uid!);
      measure();
    },
    update: (p, old) => {
      see(t.podUids, p.metadata.name, p.metadata.uid!);
      if (p.metadata.deletionTimestamp && !old.metadata.deletionTimestamp) deleted(p);
      measure();
    },
    delete: (p) => {
      if (!p.metadata.deletionTimestamp) deleted(p);
      notReadySince.set(p.metadata.name, Date.now());
      measure();
    },
  });
  const claimGone = (c: any) => {
    if (!t.deletedClaims.some((d) => d.uid === c.metadata.uid)) t.deletedClaims.push({ name: c.metadata.name, uid: c.metadata.uid, at: Date.now() });
  };
  claims.on({
    add: (c) => see(t.claimUids, c.metadata.name, c.metadata.uid!),
    update: (c) => {
      see(t.claimUids, c.metadata.name, c.metadata.uid!);
      if (c.metadata.deletionTimestamp) claimGone(c);
    },
    delete: (c) => {
      claimGone(c);
      t.claimGoneAt.set(c.metadata.uid!, Date.now());
    },
  });
  clusters.on({
    add: (c) => line(c),
    update: (c) => {
      line(c);
      measure();
      silence();
    },
  });
  const line = (c: any) => {
    const l = `${c.status?.phase ?? ''}: ${c.status?.message ?? ''}`;
    if (l !== lastLine) t.timeline.push(`+${((Date.now() - began) / 1000).toFixed(1)}s ${l}`);
    lastLine = l;
  };
  await Promise.all([pods.start(), claims.start(), clusters.start()]);
  return t;
}
