// The kubelet stand-in of the simulated nodes: for every pod the real scheduler binds to one of
// them, it does what a kubelet does, in the same order and with the same status: a pod address,
// volumes, the container's environment, the process, the startup/readiness/liveness probes,
// restarts with CrashLoopBackOff, and graceful termination (preStop, SIGTERM, the grace period,
// SIGKILL, then the pod object removed).
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFileSync, chmodSync, existsSync, mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { containerCommand, type ContainerMount } from './container.ts';
import { ContainerConfigError, expand, resolveEnv, serviceLinkEnv } from './env.ts';
import { EventRecorder } from './events.ts';
import { isNotFound, KubeError, parseQuantity, type Informer, type KObject, type Kube } from './kube.ts';
import { ImageStore, NODE_24, type BuiltImage } from './image.ts';
import type { Nodes } from './nodes.ts';
import type { PodNetwork } from './network.ts';
import { killProcessGroup, signalGroup, signalProcess, startProcess, type ExitInfo, type Proc } from './procs.ts';
import { Registry } from './registry.ts';
import { runsInFleet, SimFleets } from './sim-fleets.ts';
import type { Storage } from './storage.ts';

export const QUEEN_DATA_DIR = '/var/lib/queen/raft';
const STAND_IN_MAIN = fileURLToPath(new URL('./stand-in.ts', import.meta.url));
/** A preload for the containers run from an image: their connections leave from the pod's address. */
const POD_NETWORK_SHIM = fileURLToPath(new URL('./shim/', import.meta.url));

export interface KubeletOptions {
  kube: Kube;
  pods: Informer<KObject>;
  services: Informer<KObject>;
  storage: Storage;
  nodes: Nodes;
  dir: string;
  timeFactor: number;
  dnsAddress: string;
  simMain: string;
  /**
   * Run the Queen containers in a broker fleet (one process per test bed node, test/sim/fleet.ts)
   * rather than a process each, unless their environment says QUEEN_SIM_FLEET=0 (default false:
   * processes, unless it says QUEEN_SIM_FLEET=1).
   */
  simFleet?: boolean;
  /** Pods get 127.<ipOctet>.x.y (default 1). */
  ipOctet?: number;
  /** Images run from a folder (the operator's, built from the Dockerfile). */
  images?: ImageStore;
  /** The cluster DNS on port 53, for the resolv.conf of containers run from an image (null: none). */
  podNameserver?: string | null;
  /** The API server's address, where kube-proxy would send the kubernetes Service's clients. */
  apiServer?: { host: string; port: number };
  /** The pod network: cut-offs, partitions and NetworkPolicies, told to the simulators. */
  network?: PodNetwork;
  /** The Node objects (for the volumes the attach/detach controller reports attached). */
  nodeObjects?: Informer<KObject>;
  log: (line: string) => void;
}

const time = (ms = Date.now()) => new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');
// The kubelet's timers never keep the process alive by themselves (a test run's end must not wait
// on a grace period of a pod deleted at the last moment).
const later = (fn: () => void, ms: number): NodeJS.Timeout => setTimeout(fn, ms).unref();
const sleep = (ms: number) => new Promise<void>((r) => later(r, ms));

/**
 * The end of a container's grace period. A second delete of a pod already terminating, with a
 * shorter grace period, brings it forward (the API server only ever shortens it, and the kubelet
 * then stops the container on the shorter one, as a real kubelet cancels its kill and starts it again).
 */
class GraceDeadline {
  at: number;
  #wake = new Set<() => void>();
  constructor(at: number) {
    this.at = at;
  }
  /** Resolves once the deadline, or `floor` if that is later, has passed: sooner if the deadline is brought forward. */
  async passed(floor = 0): Promise<void> {
    for (let end = Math.max(this.at, floor); Date.now() < end; end = Math.max(this.at, floor)) {
      await new Promise<void>((resolve) => {
        const wake = () => {
          this.#wake.delete(wake);
          clearTimeout(timer);
          resolve();
        };
        const timer = later(wake, end - Date.now());
        this.#wake.add(wake);
      });
    }
  }
  /** Brings the deadline forward to `at`, never back. */
  shorten(at: number): void {
    if (at >= this.at) return;
    this.at = at;
    for (const wake of [...this.#wake]) wake();
  }
}

/** Go's time.Duration formatting, for kubelet messages ("10s", "1m20s"). */
function goDuration(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${s % 60}s`;
  return `${Math.floor(m / 60)}h${m % 60}m${s % 60}s`;
}

type State =
  | { kind: 'waiting'; reason: string; message?: string }
  | { kind: 'running'; startedAt: string }
  | { kind: 'terminated'; exitCode: number; signal?: number; reason: string; startedAt: string; finishedAt: string; containerID: string };

interface ProbeState {
  kind: 'startup' | 'readiness' | 'liveness';
  spec: any;
  timer?: NodeJS.Timeout;
  successes: number;
  failures: number;
  stopped: boolean;
}

class Container {
  spec: any;
  name: string;
  proc?: Proc;
  state: State = { kind: 'waiting', reason: 'ContainerCreating' };
  last?: Extract<State, { kind: 'terminated' }>;
  restartCount = 0;
  everStarted = false;
  started = false;
  ready = false;
  probes: ProbeState[] = [];
  hold = false;
  killing = false;
  /** While it is being stopped: when its grace period ends. */
  grace?: GraceDeadline;
  starting = false;
  /** Stopped (SIGSTOP) while its node is off the network. */
  frozen = false;
  /** Exited while its node was away: restarted when the node is back. */
  restartWhenUp = false;
  backoff?: { ms: number; lastUpdate: number };
  restartTimer?: NodeJS.Timeout;
  containerID = '';
  env: Record<string, string> = {};
  /** The image's pull back-off (ImagePullBackOff), 10 s doubling to 5 min like the restarts'. */
  pullBackoff?: { ms: number; lastUpdate: number };
  /** The simulator's files the test bed writes: its network, its volume's size. */
  netFile?: string;
  volumeFile?: string;
  dataClaim?: string;

  constructor(spec: any) {
    this.spec = spec;
    this.name = spec.name;
  }
}

class PodRuntime {
  uid: string;
  ns: string;
  name: string;
  pod: KObject;
  node: string;
  ip?: string;
  dir: string;
  startTime?: string;
  containers: Container[];
  initStatuses: any[];
  volumes = new Map<string, string>();
  claims = new Map<string, string>(); // volume name → claim name
  /** Unique names of the attachable volumes it mounts (node.status.volumesInUse). */
  inUse = new Set<string>();
  volumesReady = false;
  volumeWait?: string;
  volumeWaitSince = 0;
  volumeWaitReported = false;
  terminating = false;
  /** The deletion grace period (seconds) its termination runs on: a shorter one brings it forward. */
  graceSeconds?: number;
  finished = false;
  gone = false;
  conditions = new Map<string, { status: string; lastTransitionTime: string; reason?: string; message?: string }>();
  lastWritten = '';
  writing?: Promise<void>;
  writeAgain = false;
  syncing = false;
  syncAgain = false;
  retryTimer?: NodeJS.Timeout;
  /**
   * The time factor of this pod's timings (probes, grace, back-off). A pod run from an image (the
   * operator) keeps real time: its process does not know the test bed's factor, as the simulator does.
   */
  factor: number;

  constructor(pod: KObject, root: string, factor: number) {
    this.factor = factor;
    this.uid = pod.metadata.uid!;
    this.ns = pod.metadata.namespace!;
    this.name = pod.metadata.name;
    this.pod = pod;
    this.node = pod.spec.nodeName;
    this.dir = join(root, 'pods', `${this.ns}_${this.name}_${this.uid.slice(0, 8)}`);
    this.containers = (pod.spec.containers ?? []).map((c: any) => new Container(c));
    this.initStatuses = [];
  }

  get key() {
    return `${this.ns}/${this.name}`;
  }
}

export interface PodInfo {
  namespace: string;
  name: string;
  uid: string;
  node: string;
  ip: string | null;
  pid: number | null;
  running: boolean;
  restarts: number;
  lastExitCode: number | null;
  held: boolean;
  volumes: Record<string, string>;
  logPath: string;
  /** The Queen container runs in its node's broker fleet (its pid is a fleet node's id). */
  fleet: boolean;
  containers: Array<{ name: string; pid: number | null; running: boolean; restarts: number; lastExitCode: number | null; held: boolean; logPath: string; env: Record<string, string>; fleet: boolean }>;
}

export class Kubelet {
  #o: KubeletOptions;
  #f: number;
  #runtimes = new Map<string, PodRuntime>(); // by uid
  // 127.N.0.x is the test bed's own (its DNS on port 53 is 127.N.0.10): pods start at 127.N.1.2.
  #nextIp = 0x102;
  #events: EventRecorder;
  #stopping = false;
  #periodic?: NodeJS.Timeout;
  /** The registry the nodes pull Queen images from. */
  readonly registry = new Registry();
  /** Simulator settings per namespace (QUEEN_SIM_* knobs), under what the pod's own env says. */
  readonly simEnv = new Map<string, Record<string, string>>();
  /** What each node last reported in node.status.volumesInUse. */
  #inUseReported = new Map<string, string>();
  /** The nodes whose report is on its way, and those whose list changed meanwhile (sent after it). */
  #inUseSending = new Set<string>();
  #inUseAgain = new Set<string>();
  /** The broker fleets, one per node, for the Queen containers that run in one. */
  readonly fleets: SimFleets;

  constructor(o: KubeletOptions) {
    this.#o = o;
    this.#f = o.timeFactor;
    this.fleets = new SimFleets({ dir: o.dir, owner: o.dir, log: o.log });
    this.#events = new EventRecorder(o.kube, 'kubelet');
    o.nodeObjects?.on({ update: () => this.kick() });
  }

  /** A duration of the pod spec, scaled by the pod's time factor. */
  #scaled(rt: PodRuntime | null, seconds: number, minMs = 100): number {
    return Math.max(minMs, Math.round(seconds * 1000 * (rt?.factor ?? this.#f)));
  }

  start(): void {
    this.#o.pods.on({
      add: (p) => this.#onPod(p),
      update: (p) => this.#onPod(p),
      delete: (p) => this.#onPodGone(p),
    });
    for (const p of this.#o.pods.list()) this.#onPod(p);
    // Safety net for anything waiting on another object (a claim, a Secret): look again now and then.
    this.#periodic = setInterval(() => this.kick(), Math.max(1000, 5000 * this.#f));
  }

  /** Something the pods may be waiting for changed (storage, Secrets): sync those that wait. */
  kick(): void {
    for (const rt of this.#runtimes.values()) {
      if (rt.terminating || rt.gone) continue;
      if (!rt.volumesReady || rt.containers.some((c) => c.state.kind === 'waiting' && c.state.reason === 'CreateContainerConfigError')) {
        void this.#sync(rt);
      }
    }
  }

  #isOurs(pod: KObject): boolean {
    return typeof pod.spec?.nodeName === 'string' && this.#o.nodes.names.includes(pod.spec.nodeName);
  }

  #onPod(pod: KObject): void {
    if (this.#stopping || !this.#isOurs(pod)) return;
    if (!this.#o.nodes.isUp(pod.spec.nodeName)) return;
    const uid = pod.metadata.uid!;
    let rt = this.#runtimes.get(uid);
    if (!rt) {
      const phase = pod.status?.phase;
      if (phase === 'Succeeded' || phase === 'Failed') {
        if (pod.metadata.deletionTimestamp) void this.#deletePodObject(pod);
        return;
      }
      const fromImage = (pod.spec.containers ?? []).some((c: any) => ImageStore.isOperator(c.image ?? ''));
      rt = new PodRuntime(pod, this.#o.dir, fromImage ? 1 : this.#f);
      this.#runtimes.set(uid, rt);
    } else {
      rt.pod = pod;
      // As the kubelet's status manager: a status on the API server that is not the one last
      // written (the node-lifecycle controller marks the pods of a node it lost track of not
      // Ready, and the node is back) is written again.
      if (rt.lastWritten && conditionsDiffer(pod.status?.conditions, JSON.parse(rt.lastWritten).status?.conditions)) rt.lastWritten = '';
      // A container whose image changed is restarted with the new one, as the kubelet does.
      for (const spec of pod.spec.containers ?? []) {
        const c = rt.containers.find((x) => x.name === spec.name);
        if (!c || c.spec.image === spec.image) continue;
        c.spec = spec;
        if (c.proc && !c.proc.exit && !pod.metadata.deletionTimestamp) {
          this.#events.record(pod, 'Normal', 'Killing', `Container ${c.name} definition changed, will be restarted`, { host: rt.node, fieldPath: `spec.containers{${c.name}}` });
          void this.#killContainer(rt, c, this.#scaled(rt, pod.spec.terminationGracePeriodSeconds ?? 30, 0));
        }
      }
    }
    if (pod.metadata.deletionTimestamp) {
      const grace: number = pod.metadata.deletionGracePeriodSeconds ?? pod.spec.terminationGracePeriodSeconds ?? 30;
      if (!rt.terminating) {
        rt.graceSeconds = grace;
        void this.#terminate(rt, this.#scaled(rt, grace, 0));
      } else if (grace < (rt.graceSeconds ?? Infinity)) {
        // Deleted again with a shorter grace period: its containers stop on that one.
        this.#shortenGrace(rt, grace);
      }
      return;
    }
    void this.#sync(rt);
  }

  #onPodGone(pod: KObject): void {
    const rt = this.#runtimes.get(pod.metadata.uid!);
    if (!rt) return;
    rt.gone = true;
    this.#o.network?.detach(rt.uid);
    // A node off the network does not hear of it: its pods go on running until it is back.
    if (!this.#o.nodes.isUp(rt.node)) return;
    // Removed without the kubelet's part (a force delete): stop it with the minimum grace.
    if (!rt.finished) this.#stopAtOnce(rt);
  }

  /** A pod deleted by force: its termination with no grace, or the one under way brought forward to now. */
  #stopAtOnce(rt: PodRuntime): void {
    if (!rt.terminating) {
      void this.#terminate(rt, 0);
      return;
    }
    this.#shortenGrace(rt, 0);
  }

  /** A pod already terminating is given a shorter grace period: its containers stop on that one, counted from now. */
  #shortenGrace(rt: PodRuntime, seconds: number): void {
    rt.graceSeconds = seconds;
    const at = Date.now() + this.#scaled(rt, seconds, 0);
    for (const c of rt.containers) c.grace?.shorten(at);
  }

  #isSim(c: Container): boolean {
    const image: string = c.spec.image ?? '';
    return /queen/i.test(image) && !/operator|testbed-stand-in/i.test(image);
  }

  /**
   * A node goes off the network: its simulators are cut off (their network file says so), every
   * other container is frozen (SIGSTOP), and its kubelet does nothing more (no probes, restarts or
   * status). With `shutdown` the machine is off: every container is killed, and starts again
   * (restart policy) when the node comes back.
   */
  nodeDown(node: string, opts: { shutdown?: boolean } = {}): void {
    for (const rt of this.#runtimes.values()) {
      if (rt.node !== node) continue;
      for (const c of rt.containers) {
        if (!c.proc || c.proc.exit) continue;
        if (opts.shutdown) {
          c.restartWhenUp = true;
          killProcessGroup(c.proc);
        } else if (!this.#isSim(c)) {
          c.frozen = true;
          signalGroup(c.proc, 'SIGSTOP');
        }
      }
    }
    this.#o.network?.recompute();
  }

  /** Called when a node comes back: pods on it are looked at again. */
  resyncNode(node: string): void {
    this.#o.network?.recompute();
    for (const rt of this.#runtimes.values()) {
      if (rt.node !== node) continue;
      rt.lastWritten = '';
      for (const c of rt.containers) {
        if (c.frozen && c.proc) signalGroup(c.proc, 'SIGCONT');
        c.frozen = false;
      }
      // Deleted by force while the node was away: stopped now.
      if (rt.gone && !rt.finished) {
        this.#stopAtOnce(rt);
        continue;
      }
      for (const c of rt.containers) {
        if (c.restartWhenUp) {
          c.restartWhenUp = false;
          if (!rt.terminating && (!c.proc || c.proc.exit)) this.#scheduleRestart(rt, c);
        }
      }
    }
    for (const p of this.#o.pods.list()) if (p.spec?.nodeName === node) this.#onPod(p);
    for (const rt of this.#runtimes.values()) if (rt.node === node) this.#writeStatus(rt);
    this.#reportInUse(node);
  }

  /**
   * The address a pod had before this kubelet started (a test bed started again on its folder),
   * kept as long as no other pod shows it: its status and its Endpoints stay true.
   */
  #keptIp(rt: PodRuntime): string | null {
    const ip = rt.pod.status?.podIP as string | undefined;
    if (!ip || !ip.startsWith(`127.${this.#o.ipOctet ?? 1}.`)) return null;
    if ([...this.#runtimes.values()].some((r) => r !== rt && r.ip === ip)) return null;
    const others = this.#o.pods.list().filter((p) => p.metadata.uid !== rt.uid && p.status?.podIP === ip && !p.metadata.deletionTimestamp);
    return others.length === 0 ? ip : null;
  }

  #allocateIp(): string {
    // 127.N.0.2 .. 127.N.255.254 (N the test bed's range), never reused while the test bed runs
    // (until it wraps), nor while a pod object still shows it: a test bed started again on its
    // folder counts from the start, beside the pods its last run left.
    const shown = new Set(this.#o.pods.list().map((p) => p.status?.podIP).filter(Boolean));
    for (;;) {
      const n = this.#nextIp++;
      if (this.#nextIp > 0xfffe) this.#nextIp = 0x102;
      const ip = `127.${this.#o.ipOctet ?? 1}.${(n >> 8) & 0xff}.${n & 0xff}`;
      if ((n & 0xff) === 0 || (n & 0xff) === 255) continue;
      if (shown.has(ip)) continue;
      if (![...this.#runtimes.values()].some((r) => r.ip === ip)) return ip;
    }
  }

  // ---- pod start -------------------------------------------------------------------------

  async #sync(rt: PodRuntime): Promise<void> {
    if (rt.syncing) {
      rt.syncAgain = true;
      return;
    }
    rt.syncing = true;
    try {
      do {
        rt.syncAgain = false;
        await this.#syncOnce(rt);
      } while (rt.syncAgain && !rt.terminating && !rt.gone);
    } catch (e) {
      // An API server that does not answer (it restarts), or any other failure: as a kubelet's pod
      // worker, the pod is synced again a while later, rather than left as it is for good.
      this.#o.log(`kubelet ${rt.key}: ${(e as Error).stack ?? e}; syncing again later`);
      this.#retryLater(rt);
    } finally {
      rt.syncing = false;
    }
  }

  async #syncOnce(rt: PodRuntime): Promise<void> {
    if (rt.terminating || rt.gone || this.#stopping) return;
    if (!rt.startTime) rt.startTime = time();
    if (!rt.volumesReady) {
      const wait = await this.#setupVolumes(rt);
      if (rt.terminating || rt.gone) return;
      if (wait) {
        // As the kubelet: a FailedMount event once the wait has lasted its two minutes.
        if (!rt.volumeWaitSince) rt.volumeWaitSince = Date.now();
        rt.volumeWait = wait;
        if (!rt.volumeWaitReported && Date.now() - rt.volumeWaitSince >= this.#scaled(rt, 120)) {
          rt.volumeWaitReported = true;
          this.#events.record(rt.pod, 'Warning', 'FailedMount', `Unable to attach or mount volumes: ${wait}`, { host: rt.node });
        }
        this.#writeStatus(rt);
        return;
      }
      rt.volumesReady = true;
      rt.volumeWait = undefined;
      // A pod mounting a claim whose growth waits for the node: the file system grows now.
      for (const claim of new Set(rt.claims.values())) {
        await this.#o.storage.finishNodeResize(rt.ns, claim).catch((e) => this.#o.log(`kubelet ${rt.key}: resize of ${claim}: ${(e as Error).message}`));
      }
      rt.initStatuses = (rt.pod.spec.initContainers ?? []).map((c: any) => {
        const t = time();
        return {
          name: c.name,
          image: c.image,
          imageID: imageID(c.image),
          containerID: `testbed://${rt.uid.slice(0, 8)}-${c.name}`,
          ready: true,
          started: false,
          restartCount: 0,
          state: { terminated: { exitCode: 0, reason: 'Completed', startedAt: t, finishedAt: t, containerID: `testbed://${rt.uid.slice(0, 8)}-${c.name}` } },
          lastState: {},
        };
      });
    }
    if (!rt.ip) rt.ip = this.#keptIp(rt) ?? this.#allocateIp();
    for (const c of rt.containers) {
      if (c.proc && !c.proc.exit) continue;
      if (c.hold || c.restartTimer || c.killing || c.starting) continue;
      if (c.state.kind === 'terminated') continue; // not restarted by its policy
      if (c.state.kind === 'waiting' && c.state.reason === 'CrashLoopBackOff') continue;
      await this.#startContainer(rt, c);
      if (c.state.kind === 'waiting' && (c.state.reason === 'ErrImagePull' || c.state.reason === 'ImagePullBackOff')) continue;
      if (rt.terminating || rt.gone) return;
    }
    this.#writeStatus(rt);
  }

  /** Returns why the volumes are not ready, or undefined once they are all set up. */
  async #setupVolumes(rt: PodRuntime): Promise<string | undefined> {
    const volRoot = join(rt.dir, 'volumes');
    for (const v of rt.pod.spec.volumes ?? []) {
      if (rt.volumes.has(v.name)) continue;
      if (v.persistentVolumeClaim) {
        const claimName = v.persistentVolumeClaim.claimName;
        const pvc = this.#o.storage.claimFolder(rt.ns, claimName);
        if ('waiting' in pvc) return pvc.waiting;
        if (pvc.pvc.metadata.deletionTimestamp) return `persistentvolumeclaim "${claimName}" is being deleted`;
        // An attachable volume is mounted once the attach/detach controller attached it here.
        const unique = this.#o.storage.attachName(pvc.pv);
        if (unique) {
          rt.inUse.add(unique);
          this.#reportInUse(rt.node);
          if (!this.#attached(rt.node, unique)) return `unmounted volumes=[${v.name}], unattached volumes=[${v.name}]: timed out waiting for the condition`;
        }
        rt.volumes.set(v.name, pvc.folder);
        rt.claims.set(v.name, claimName);
        continue;
      }
      const folder = join(volRoot, v.name);
      mkdirSync(folder, { recursive: true });
      // An emptyDir is writable by whichever user the containers run as, as the kubelet makes it.
      if (v.emptyDir) chmodSync(folder, 0o777);
      if (v.configMap || v.secret || v.projected || v.downwardAPI) {
        const missing = await this.#writeProjected(rt, v, folder);
        if (missing) {
          rmSync(folder, { recursive: true, force: true });
          return `MountVolume.SetUp failed for volume "${v.name}" : ${missing}`;
        }
      }
      rt.volumes.set(v.name, folder);
    }
    return undefined;
  }

  /**
   * Writes the files of a configMap, secret, downwardAPI or projected volume as they are now (no
   * later updates). Returns what is missing, if a required object does not exist.
   */
  async #writeProjected(rt: PodRuntime, v: any, folder: string): Promise<string | undefined> {
    const kube = this.#o.kube;
    const sources: any[] = v.projected?.sources ?? [v.configMap ? { configMap: v.configMap } : v.secret ? { secret: v.secret } : { downwardAPI: v.downwardAPI }];
    const write = (path: string, data: string | Buffer) => {
      const p = join(folder, path);
      mkdirSync(join(p, '..'), { recursive: true });
      writeFileSync(p, data);
    };
    for (const s of sources) {
      if (s.configMap || s.secret) {
        const ref = s.configMap ?? s.secret;
        const name: string = s.configMap ? ref.name : (ref.secretName ?? ref.name);
        const kind = s.configMap ? 'configmap' : 'secret';
        const obj = await kube.getOrNull(`/api/v1/namespaces/${rt.ns}/${kind}s/${name}`);
        if (!obj) {
          if (ref.optional) continue;
          return `${kind} "${name}" not found`;
        }
        const data: Record<string, Buffer> = {};
        for (const [k, val] of Object.entries((obj.data ?? {}) as Record<string, string>)) data[k] = s.configMap ? Buffer.from(val) : Buffer.from(val, 'base64');
        for (const [k, val] of Object.entries(((obj as any).binaryData ?? {}) as Record<string, string>)) data[k] = Buffer.from(val, 'base64');
        const items: Array<{ key: string; path: string }> = ref.items ?? Object.keys(data).map((k) => ({ key: k, path: k }));
        for (const item of items) {
          if (data[item.key] === undefined) {
            if (ref.optional) continue;
            return `configmap references non-existent config key: ${item.key}`;
          }
          write(item.path, data[item.key]!);
        }
      } else if (s.downwardAPI) {
        for (const item of s.downwardAPI.items ?? []) {
          const fp = item.fieldRef?.fieldPath;
          const md = rt.pod.metadata;
          const value = fp === 'metadata.namespace' ? rt.ns : fp === 'metadata.name' ? rt.name : fp === 'metadata.uid' ? rt.uid : fp === 'metadata.labels' ? kv(md.labels) : fp === 'metadata.annotations' ? kv(md.annotations) : '';
          write(item.path, value);
        }
      } else if (s.serviceAccountToken) {
        // A real bound token, as the kubelet requests it.
        const sa = rt.pod.spec.serviceAccountName ?? 'default';
        const tr: any = await kube
          .create(`/api/v1/namespaces/${rt.ns}/serviceaccounts/${sa}/token`, {
            apiVersion: 'authentication.k8s.io/v1',
            kind: 'TokenRequest',
            spec: {
              audiences: s.serviceAccountToken.audience ? [s.serviceAccountToken.audience] : undefined,
              expirationSeconds: s.serviceAccountToken.expirationSeconds ?? 3607,
              boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: rt.name, uid: rt.uid },
            },
          })
          .catch(() => null);
        write(s.serviceAccountToken.path ?? 'token', tr?.status?.token ?? '');
      }
    }
    return undefined;
  }

  #mountsOf(rt: PodRuntime, c: Container): Record<string, string> {
    const mounts: Record<string, string> = {};
    for (const m of c.spec.volumeMounts ?? []) {
      const base = rt.volumes.get(m.name);
      if (!base) continue;
      const host = m.subPath ? join(base, m.subPath) : base;
      mkdirSync(host, { recursive: true });
      mounts[m.mountPath] = host;
    }
    return mounts;
  }

  #logPath(rt: PodRuntime, c: Container): string {
    return join(this.#o.dir, 'logs', 'pods', `${rt.ns}_${rt.name}_${rt.uid.slice(0, 8)}_${c.name}.log`);
  }

  /** The claim mounted where the container keeps `dataDir`, if any. */
  #claimOf(rt: PodRuntime, c: Container, dataDir: string): string | undefined {
    const mount = (c.spec.volumeMounts ?? [])
      .filter((m: any) => dataDir === m.mountPath || dataDir.startsWith(m.mountPath.replace(/\/$/, '') + '/'))
      .sort((a: any, b: any) => b.mountPath.length - a.mountPath.length)[0];
    return mount ? rt.claims.get(mount.name) : undefined;
  }

  /** Whether a running pod mounts the claim. */
  isMounted(ns: string, claim: string): boolean {
    for (const rt of this.#runtimes.values()) {
      if (rt.ns !== ns || rt.terminating || rt.gone || !rt.volumesReady) continue;
      if ([...rt.claims.values()].includes(claim) && rt.containers.some((c) => c.proc && !c.proc.exit)) return true;
    }
    return false;
  }

  /**
   * Freezes (SIGSTOP) the processes of the running pods that mount the claim, a broker fleet's
   * whole process for a container in one, while a snapshot of its volume is copied: the copy is
   * then what a crash at that moment would leave. The function returned thaws them (SIGCONT),
   * but for a container that its node's stop froze meanwhile.
   */
  freezeClaim(ns: string, claim: string): () => void {
    const frozen = new Map<number, Container>();
    for (const rt of this.#runtimes.values()) {
      if (rt.ns !== ns || rt.gone || ![...rt.claims.values()].includes(claim)) continue;
      for (const c of rt.containers) {
        if (!c.proc || c.proc.exit || c.frozen) continue;
        const pid = c.proc.fleetNode ? c.proc.fleetNode.processPid : c.proc.pid;
        if (pid <= 0 || frozen.has(pid)) continue;
        try {
          process.kill(pid, 'SIGSTOP');
          frozen.set(pid, c);
        } catch {
          // exited meanwhile
        }
      }
    }
    return () => {
      for (const [pid, c] of frozen) {
        if (c.frozen) continue;
        try {
          process.kill(pid, 'SIGCONT');
        } catch {
          // exited meanwhile
        }
      }
    };
  }

  /**
   * The file system of a claim grew while its pods run (an online expansion): the simulators that
   * keep their data on it see the new size.
   */
  fileSystemResized(ns: string, claim: string, bytes: number): void {
    for (const rt of this.#runtimes.values()) {
      if (rt.ns !== ns || rt.terminating || rt.gone) continue;
      for (const c of rt.containers) if (c.volumeFile && c.dataClaim === claim) writeJsonFile(c.volumeFile, { bytes });
    }
  }

  async #volumeBytes(rt: PodRuntime, c: Container, dataDir: string): Promise<number | undefined> {
    const mount = (c.spec.volumeMounts ?? [])
      .filter((m: any) => dataDir === m.mountPath || dataDir.startsWith(m.mountPath.replace(/\/$/, '') + '/'))
      .sort((a: any, b: any) => b.mountPath.length - a.mountPath.length)[0];
    if (!mount) return undefined;
    const claim = rt.claims.get(mount.name);
    if (claim) {
      const pvc = await this.#o.kube.getOrNull(`/api/v1/namespaces/${rt.ns}/persistentvolumeclaims/${claim}`);
      const cap = pvc?.status?.capacity?.storage;
      return cap ? parseQuantity(cap) : undefined;
    }
    const vol = (rt.pod.spec.volumes ?? []).find((v: any) => v.name === mount.name);
    if (vol?.emptyDir?.sizeLimit) return parseQuantity(vol.emptyDir.sizeLimit);
    return undefined;
  }

  async #startContainer(rt: PodRuntime, c: Container): Promise<void> {
    if (c.starting) return;
    c.starting = true;
    try {
      await this.#startContainerNow(rt, c);
    } finally {
      c.starting = false;
    }
  }

  async #startContainerNow(rt: PodRuntime, c: Container): Promise<void> {
    const o = this.#o;
    const node = rt.node;
    let env: Array<[string, string]>;
    try {
      const services = o.services.list().filter((s) => s.metadata.namespace === rt.ns && rt.pod.spec.enableServiceLinks !== false);
      const master = o.services.get('default/kubernetes');
      const all = master && !services.some((s) => s.metadata.name === 'kubernetes') ? [master, ...services] : services;
      env = await resolveEnv(rt.pod, c.spec, {
        secret: (ns, name) => o.kube.getOrNull(`/api/v1/namespaces/${ns}/secrets/${name}`),
        configMap: (ns, name) => o.kube.getOrNull(`/api/v1/namespaces/${ns}/configmaps/${name}`),
        serviceEnv: serviceLinkEnv(all),
        podIP: rt.ip!,
        hostIP: o.nodes.ipOf(node),
        nodeAllocatable: { cpu: '16', memory: '64Gi', 'ephemeral-storage': '200Gi' },
      });
    } catch (e) {
      if (!(e instanceof ContainerConfigError)) throw e;
      const message = e.message;
      if (!(c.state.kind === 'waiting' && c.state.reason === 'CreateContainerConfigError' && c.state.message === message)) {
        this.#events.record(rt.pod, 'Warning', 'Failed', `Error: ${message}`, { host: node, fieldPath: `spec.containers{${c.name}}` });
      }
      c.state = { kind: 'waiting', reason: 'CreateContainerConfigError', message };
      this.#writeStatus(rt);
      this.#retryLater(rt);
      return;
    }
    if (rt.terminating || rt.gone || this.#stopping) return;

    const image: string = c.spec.image ?? '';
    const cwd = join(rt.dir, 'containers', c.name);
    mkdirSync(cwd, { recursive: true });
    const hostname = String(rt.pod.spec.hostname ?? rt.name).slice(0, 63);
    const logPath = this.#logPath(rt, c);
    mkdirSync(join(logPath, '..'), { recursive: true });
    let command: string;
    let args: string[];
    let containerEnv: Record<string, string>;
    let inFleet = false;
    if (ImageStore.isOperator(image)) {
      // Pulling the image: the operator's, built from the Dockerfile once per test bed.
      let built: BuiltImage | null;
      try {
        built = (await o.images?.resolve(image)) ?? null;
        if (!built) throw new Error('the test bed has no image store');
      } catch (e) {
        const message = `failed to pull image "${image}": ${(e as Error).message.split('\n')[0]}`;
        this.#events.record(rt.pod, 'Warning', 'Failed', `Failed to pull image "${image}": ${(e as Error).message.split('\n')[0]}`, { host: node, fieldPath: `spec.containers{${c.name}}` });
        c.state = { kind: 'waiting', reason: 'ErrImagePull', message };
        this.#writeStatus(rt);
        this.#retryLater(rt);
        return;
      }
      if (rt.terminating || rt.gone || this.#stopping) return;
      const run = this.#fromImage(rt, c, built, env, hostname);
      command = run.command;
      args = run.args;
      containerEnv = run.env;
      appendFileSync(logPath, `--- test bed: ${time()} starting container ${c.name} of ${rt.key} (restart ${c.restartCount}) image ${image} (built ${built.key}) ip ${rt.ip} on ${node}\n`);
    } else {
      // The Queen broker's image runs the simulator (any image naming queen, but not an operator's).
      const isQueen = this.#isSim(c);
      if (isQueen && !(await this.#pullImage(rt, c))) return;
      if (rt.terminating || rt.gone || this.#stopping) return;
      const mounts = this.#mountsOf(rt, c);
      containerEnv = {};
      containerEnv.PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
      containerEnv.HOME = cwd;
      containerEnv.HOSTNAME = hostname;
      // The processes the test bed starts share the tests' compile cache (vitest.config.ts), as an
      // image's code would be compiled once: it starts on half the CPU.
      if (process.env.NODE_COMPILE_CACHE) containerEnv.NODE_COMPILE_CACHE = process.env.NODE_COMPILE_CACHE;
      // The namespace's simulator settings (data sizes, link speeds...), then what the pod says.
      if (isQueen) Object.assign(containerEnv, this.simEnv.get(rt.ns) ?? {});
      for (const [k, v] of env) containerEnv[k] = v;
      containerEnv.QUEEN_SIM_IP = rt.ip!;
      containerEnv.QUEEN_SIM_DNS = o.dnsAddress;
      containerEnv.QUEEN_SIM_MOUNTS = JSON.stringify(mounts);
      containerEnv.QUEEN_SIM_IMAGE = image;
      containerEnv.QUEEN_SIM_TIME_FACTOR = String(this.#f);
      containerEnv.QUEEN_SIM_POD = `${rt.ns}/${rt.name}`;
      // The simulator's safety net: it exits if the test bed's process is gone.
      containerEnv.QUEEN_SIM_EXIT_WITH_PARENT = String(process.pid);
      const dataDir = containerEnv.QUEEN_RAFT_DIR || QUEEN_DATA_DIR;
      const bytes = await this.#volumeBytes(rt, c, dataDir);
      if (bytes !== undefined) containerEnv.QUEEN_SIM_VOLUME_BYTES = String(bytes);
      if (isQueen) {
        // Files the test bed keeps up to date while it runs: its network, its volume's size.
        c.netFile = join(cwd, 'net.json');
        o.network?.attach(rt.pod, c.name, c.netFile);
        containerEnv.QUEEN_SIM_NET_FILE = c.netFile;
        c.volumeFile = join(cwd, 'volume.json');
        c.dataClaim = this.#claimOf(rt, c, dataDir);
        writeJsonFile(c.volumeFile, bytes === undefined ? {} : { bytes });
        containerEnv.QUEEN_SIM_VOLUME_FILE = c.volumeFile;
      }
      if (rt.terminating || rt.gone || this.#stopping) return;
      appendFileSync(logPath, `--- test bed: ${time()} starting container ${c.name} of ${rt.key} (restart ${c.restartCount}) image ${image} ip ${rt.ip} on ${node}\n`);
      if (isQueen) {
        command = process.execPath;
        args = [o.simMain];
        inFleet = runsInFleet(containerEnv, o.simFleet === true);
      } else if (/testbed-stand-in/.test(image)) {
        command = process.execPath;
        args = [STAND_IN_MAIN];
      } else if (existsSync('/bin/sleep')) {
        command = '/bin/sleep';
        args = ['infinity'];
      } else {
        command = process.execPath;
        args = ['-e', "process.on('SIGTERM',()=>process.exit(0));setInterval(()=>{},1<<30)"];
      }
    }
    const proc = inFleet
      ? this.fleets.start(node, `${rt.key}/${c.name}`, containerEnv, logPath)
      : startProcess(`${rt.key}/${c.name}`, command, args, { cwd, env: containerEnv, logPath, owner: o.dir });
    c.proc = proc;
    c.env = containerEnv;
    c.containerID = `testbed://${createHash('sha256').update(`${rt.uid}/${c.name}/${c.restartCount}/${proc.pid}`).digest('hex').slice(0, 32)}`;
    const startedAt = time();
    c.state = { kind: 'running', startedAt };
    c.everStarted = true;
    c.killing = false;
    const hasStartup = !!c.spec.startupProbe;
    c.started = !hasStartup;
    c.ready = false;
    this.#events.record(rt.pod, 'Normal', 'Started', `Started container ${c.name}`, { host: node, fieldPath: `spec.containers{${c.name}}` });
    void proc.exited.then((exit) => this.#onExit(rt, c, proc, exit));
    this.#startProbes(rt, c, Date.now());
    this.#writeStatus(rt);
  }

  /**
   * The image pull of a Queen container, as a kubelet does it: present on the node and
   * IfNotPresent, nothing to do; else Pulling, then Pulled after the registry's pull time, or, for
   * an image the registry does not have, Failed with NotFound (ErrImagePull), then
   * ImagePullBackOff until the next try (10 s doubling to 5 min). True once the image is there.
   */
  async #pullImage(rt: PodRuntime, c: Container): Promise<boolean> {
    const image: string = c.spec.image ?? '';
    const reg = this.registry;
    const node = rt.node;
    const tag = Registry.tagOf(image);
    const policy: string = c.spec.imagePullPolicy ?? (tag === null || tag === 'latest' ? 'Always' : 'IfNotPresent');
    const field = { host: node, fieldPath: `spec.containers{${c.name}}` };
    const present = reg.has(node, image);
    if (present && policy !== 'Always') {
      this.#events.record(rt.pod, 'Normal', 'Pulled', `Container image "${image}" already present on machine`, field);
      return true;
    }
    if (policy === 'Never') {
      const message = `Container image "${image}" is not present with pull policy of Never`;
      this.#events.record(rt.pod, 'Warning', 'ErrImageNeverPull', message, field);
      c.state = { kind: 'waiting', reason: 'ErrImageNeverPull', message };
      this.#writeStatus(rt);
      this.#retryLater(rt);
      return false;
    }
    this.#events.record(rt.pod, 'Normal', 'Pulling', `Pulling image "${image}"`, field);
    if (c.state.kind !== 'waiting' || c.state.reason !== 'ImagePullBackOff') c.state = { kind: 'waiting', reason: 'ContainerCreating' };
    this.#writeStatus(rt);
    const missing = reg.isMissing(image);
    const ms = missing ? this.#scaled(rt, 1, 100) : present ? this.#scaled(rt, 0.2, 50) : this.#scaled(rt, reg.pullSeconds, 0);
    await sleep(ms);
    if (rt.terminating || rt.gone || this.#stopping) return false;
    if (!missing && !reg.isMissing(image)) {
      reg.add(node, image);
      c.pullBackoff = undefined;
      const secs = `${(ms / rt.factor / 1000).toFixed(3).replace(/\.?0+$/, '')}s`;
      this.#events.record(rt.pod, 'Normal', 'Pulled', `Successfully pulled image "${image}" in ${secs} (${secs} including waiting). Image size: ${reg.imageBytes} bytes.`, field);
      return true;
    }
    const err = `rpc error: code = NotFound desc = failed to pull and unpack image "${image}": failed to resolve reference "${image}": ${image}: not found`;
    this.#events.record(rt.pod, 'Warning', 'Failed', `Failed to pull image "${image}": ${err}`, field);
    this.#events.record(rt.pod, 'Warning', 'Failed', 'Error: ErrImagePull', field);
    c.state = { kind: 'waiting', reason: 'ErrImagePull', message: err };
    this.#writeStatus(rt);
    const now = Date.now();
    const initial = this.#scaled(rt, 10);
    const max = this.#scaled(rt, 300);
    const b = c.pullBackoff;
    c.pullBackoff = !b || now - b.lastUpdate > 2 * max ? { ms: initial, lastUpdate: now } : { ms: Math.min(b.ms * 2, max), lastUpdate: now };
    const wait = c.pullBackoff.ms;
    c.restartTimer = later(() => {
      c.restartTimer = undefined;
      if (!rt.terminating && !rt.gone) void this.#sync(rt);
    }, wait);
    // The next look at the pod, within the back-off, says ImagePullBackOff.
    later(() => {
      if (rt.terminating || rt.gone || !c.restartTimer || c.state.kind !== 'waiting' || c.state.reason !== 'ErrImagePull') return;
      c.state = { kind: 'waiting', reason: 'ImagePullBackOff', message: `Back-off pulling image "${image}": ErrImagePull: ${err}` };
      this.#events.record(rt.pod, 'Normal', 'BackOff', `Back-off pulling image "${image}"`, field);
      this.#events.record(rt.pod, 'Warning', 'Failed', 'Error: ImagePullBackOff', field);
      this.#writeStatus(rt);
    }, Math.min(wait / 2, this.#scaled(rt, 2, 100)));
    return false;
  }

  /** Whether the attach/detach controller reports the volume attached to the node. */
  #attached(node: string, unique: string): boolean {
    const inf = this.#o.nodeObjects;
    if (!inf) return true;
    return ((inf.get(node)?.status?.volumesAttached ?? []) as { name: string }[]).some((v) => v.name === unique);
  }

  /**
   * node.status.volumesInUse, as a kubelet reports it: the volumes its pods mount or are about to
   * mount, until they are unmounted. The attach/detach controller does not detach a volume in use
   * (short of its 6-minute force detach of an unhealthy node's volumes, or the out-of-service taint).
   */
  #reportInUse(node: string): void {
    if (!this.#o.nodeObjects || !this.#o.nodes.isUp(node) || this.#stopping) return;
    // One report of a node at a time, in order: two on their way at once may land in the other
    // order, and a volume whose pod left would stay reported in use (and never be detached for
    // the pod's successor on another node: a Multi-Attach error for six minutes).
    if (this.#inUseSending.has(node)) {
      this.#inUseAgain.add(node);
      return;
    }
    const names = new Set<string>();
    for (const rt of this.#runtimes.values()) if (rt.node === node) for (const n of rt.inUse) names.add(n);
    const list = [...names].sort();
    const text = JSON.stringify(list);
    if (this.#inUseReported.get(node) === text) return;
    this.#inUseSending.add(node);
    void this.#o.kube
      .mergePatch(`/api/v1/nodes/${node}/status`, { status: { volumesInUse: list.length ? list : null } })
      .then(
        () => {
          this.#inUseReported.set(node, text);
          return true;
        },
        (e) => {
          this.#inUseReported.delete(node);
          this.#o.log(`kubelet: volumesInUse of ${node}: ${(e as Error).message}`);
          return false;
        },
      )
      .then((sent) => {
        this.#inUseSending.delete(node);
        if (this.#inUseAgain.delete(node) && sent) this.#reportInUse(node);
        else if (!sent) setTimeout(() => this.#reportInUse(node), 1000).unref();
      });
  }

  /**
   * How a container of an image folder starts: the image's entrypoint and command unless the pod
   * gives its own (with $(VAR) expansion), the image's ENV under the pod's, the pod's user, its
   * volumes (read-only where the mount says so), the cluster DNS as its resolver, and the
   * in-cluster API address where kube-proxy would send the kubernetes Service's clients.
   */
  #fromImage(rt: PodRuntime, c: Container, built: BuiltImage, env: Array<[string, string]>, hostname: string): { command: string; args: string[]; env: Record<string, string> } {
    const o = this.#o;
    const containerEnv: Record<string, string> = {
      PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      HOSTNAME: hostname,
      HOME: '/home/nonroot',
      ...built.env,
    };
    for (const [k, v] of env) containerEnv[k] = v;
    if (o.apiServer && containerEnv.KUBERNETES_SERVICE_HOST) {
      const { host, port } = o.apiServer;
      Object.assign(containerEnv, {
        KUBERNETES_SERVICE_HOST: host,
        KUBERNETES_SERVICE_PORT: String(port),
        KUBERNETES_SERVICE_PORT_HTTPS: String(port),
        KUBERNETES_PORT: `tcp://${host}:${port}`,
        KUBERNETES_PORT_443_TCP: `tcp://${host}:${port}`,
        KUBERNETES_PORT_443_TCP_ADDR: host,
        KUBERNETES_PORT_443_TCP_PORT: String(port),
      });
    }
    const lookup = (name: string) => containerEnv[name];
    const command: string[] = c.spec.command ? c.spec.command.map((x: string) => expand(x, lookup)) : built.entrypoint;
    const args: string[] = c.spec.args ? c.spec.args.map((x: string) => expand(x, lookup)) : c.spec.command ? [] : built.cmd;
    const podSc = rt.pod.spec.securityContext ?? {};
    const sc = c.spec.securityContext ?? {};
    const uid: number | undefined = sc.runAsUser ?? podSc.runAsUser ?? built.user?.uid;
    const gid: number | undefined = sc.runAsGroup ?? podSc.runAsGroup ?? built.user?.gid ?? uid;
    const mounts: ContainerMount[] = [];
    for (const m of c.spec.volumeMounts ?? []) {
      const base = rt.volumes.get(m.name);
      if (!base) continue;
      const host = m.subPath ? join(base, m.subPath) : base;
      mkdirSync(host, { recursive: true });
      mounts.push({ path: m.mountPath, host, readOnly: !!m.readOnly });
    }
    // Its connections leave from the pod's address (test/testbed/shim/pod-source.mjs).
    mounts.push({ path: '/.testbed', host: POD_NETWORK_SHIM, readOnly: true });
    containerEnv.NODE_OPTIONS = `${containerEnv.NODE_OPTIONS ?? ''} --import=/.testbed/pod-source.mjs`.trim();
    containerEnv.TESTBED_POD_IP = rt.ip!;
    const ns = rt.ns;
    const run = containerCommand({
      image: built,
      nodeBinary: NODE_24,
      argv: [...command, ...args],
      workdir: c.spec.workingDir ?? built.workdir,
      user: uid === undefined ? null : { uid, gid: gid ?? uid },
      readOnlyRoot: !!sc.readOnlyRootFilesystem,
      mounts,
      hostname,
      podIp: rt.ip!,
      nameserver: o.podNameserver ?? null,
      searches: [`${ns}.svc.cluster.local`, 'svc.cluster.local', 'cluster.local'],
      rootDir: join(rt.dir, 'containers', c.name, 'root'),
      etcDir: join(rt.dir, 'containers', c.name, 'etc'),
    });
    return { ...run, env: containerEnv };
  }

  #retryLater(rt: PodRuntime): void {
    if (rt.retryTimer) return;
    rt.retryTimer = later(() => {
      rt.retryTimer = undefined;
      void this.#sync(rt);
    }, this.#scaled(rt, 10, 1000));
  }

  // ---- probes -----------------------------------------------------------------------------

  #startProbes(rt: PodRuntime, c: Container, startedMs: number): void {
    for (const p of c.probes) this.#stopProbe(p);
    c.probes = [];
    if (c.spec.startupProbe) {
      this.#runProbe(rt, c, { kind: 'startup', spec: c.spec.startupProbe, successes: 0, failures: 0, stopped: false }, startedMs);
    } else {
      this.#afterStartup(rt, c, startedMs);
    }
  }

  #afterStartup(rt: PodRuntime, c: Container, startedMs: number): void {
    if (c.spec.readinessProbe) {
      this.#runProbe(rt, c, { kind: 'readiness', spec: c.spec.readinessProbe, successes: 0, failures: 0, stopped: false }, startedMs);
    } else {
      c.ready = true;
    }
    if (c.spec.livenessProbe) {
      this.#runProbe(rt, c, { kind: 'liveness', spec: c.spec.livenessProbe, successes: 0, failures: 0, stopped: false }, startedMs);
    }
    this.#writeStatus(rt);
  }

  #stopProbe(p: ProbeState): void {
    p.stopped = true;
    if (p.timer) clearTimeout(p.timer);
  }

  #runProbe(rt: PodRuntime, c: Container, p: ProbeState, startedMs: number): void {
    c.probes.push(p);
    const spec = p.spec;
    const period = this.#scaled(rt, spec.periodSeconds ?? 10);
    const timeout = this.#scaled(rt, spec.timeoutSeconds ?? 1);
    const failureThreshold = spec.failureThreshold ?? 3;
    const successThreshold = p.kind === 'readiness' ? (spec.successThreshold ?? 1) : 1;
    const firstAt = startedMs + this.#scaled(rt, spec.initialDelaySeconds ?? 0, 0);
    const tick = async () => {
      if (p.stopped) return;
      const began = Date.now();
      if (!this.#o.nodes.isUp(rt.node)) {
        // A node off the network: its kubelet probes nothing.
        p.timer = later(tick, period);
        return;
      }
      const result = await this.#probe(rt, c, spec, timeout);
      if (p.stopped) return;
      if (result.ok) {
        p.failures = 0;
        p.successes++;
      } else {
        p.successes = 0;
        p.failures++;
        this.#events.record(rt.pod, 'Warning', 'Unhealthy', `${p.kind[0]!.toUpperCase()}${p.kind.slice(1)} probe failed: ${result.output}`, {
          host: rt.node,
          fieldPath: `spec.containers{${c.name}}`,
        });
      }
      if (p.kind === 'startup') {
        if (p.successes >= 1) {
          this.#stopProbe(p);
          c.started = true;
          this.#afterStartup(rt, c, startedMs);
          return;
        }
        if (p.failures >= failureThreshold) {
          this.#stopProbe(p);
          void this.#killForRestart(rt, c, 'startup', spec);
          return;
        }
      } else if (p.kind === 'liveness') {
        if (p.failures >= failureThreshold) {
          this.#stopProbe(p);
          void this.#killForRestart(rt, c, 'liveness', spec);
          return;
        }
      } else {
        const wasReady = c.ready;
        if (p.successes >= successThreshold) c.ready = true;
        if (p.failures >= failureThreshold) c.ready = false;
        if (wasReady !== c.ready) this.#writeStatus(rt);
      }
      p.timer = later(tick, Math.max(0, began + period - Date.now()));
    };
    p.timer = later(tick, Math.max(0, firstAt - Date.now()));
  }

  #portOf(c: Container, port: number | string): number {
    if (typeof port === 'number') return port;
    if (/^\d+$/.test(port)) return Number(port);
    const named = (c.spec.ports ?? []).find((p: any) => p.name === port);
    return named ? Number(named.containerPort) : NaN;
  }

  async #probe(rt: PodRuntime, c: Container, spec: any, timeoutMs: number): Promise<{ ok: boolean; output: string }> {
    const ip = rt.ip!;
    if (spec.tcpSocket || spec.grpc) {
      const port = this.#portOf(c, (spec.tcpSocket ?? spec.grpc).port);
      const host = spec.tcpSocket?.host ?? ip;
      return new Promise((resolve) => {
        const sock = connect({ host, port });
        const done = (ok: boolean, output: string) => {
          clearTimeout(timer);
          sock.destroy();
          resolve({ ok, output });
        };
        const timer = later(() => done(false, `dial tcp ${host}:${port}: i/o timeout`), timeoutMs);
        sock.once('connect', () => done(true, ''));
        sock.once('error', (e: NodeJS.ErrnoException) => done(false, `dial tcp ${host}:${port}: connect: ${e.code === 'ECONNREFUSED' ? 'connection refused' : e.message}`));
      });
    }
    if (spec.httpGet) {
      const g = spec.httpGet;
      const port = this.#portOf(c, g.port);
      const host = g.host ?? ip;
      const https = String(g.scheme ?? 'HTTP').toUpperCase() === 'HTTPS';
      const headers: Record<string, string> = { 'user-agent': 'kube-probe/1.36', accept: '*/*' };
      for (const h of g.httpHeaders ?? []) headers[h.name.toLowerCase()] = h.value;
      const url = `${https ? 'https' : 'http'}://${host}:${port}${g.path ?? '/'}`;
      return new Promise((resolve) => {
        const req = (https ? httpsRequest : httpRequest)(url, { method: 'GET', headers, agent: false, rejectUnauthorized: false } as any, (res) => {
          res.resume();
          const code = res.statusCode ?? 0;
          clearTimeout(timer);
          resolve(code >= 200 && code < 400 ? { ok: true, output: '' } : { ok: false, output: `HTTP probe failed with statuscode: ${code}` });
        });
        const timer = later(() => {
          req.destroy();
          resolve({ ok: false, output: `Get "${url}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)` });
        }, timeoutMs);
        req.on('error', (e: NodeJS.ErrnoException) => {
          clearTimeout(timer);
          resolve({ ok: false, output: `Get "${url}": dial tcp ${host}:${port}: connect: ${e.code === 'ECONNREFUSED' ? 'connection refused' : e.message}` });
        });
        req.end();
      });
    }
    if (spec.exec) {
      const code = await this.#execOnHost(rt, c, spec.exec.command ?? [], timeoutMs);
      return code === 0 ? { ok: true, output: '' } : { ok: false, output: `command ${JSON.stringify(spec.exec.command)} exited with ${code}` };
    }
    return { ok: true, output: '' };
  }

  /** Runs an exec probe or hook command on the host, in the container's folder, time-limited. */
  #execOnHost(rt: PodRuntime, c: Container, command: string[], timeoutMs: number): Promise<number> {
    if (!command.length) return Promise.resolve(126);
    return new Promise((resolve) => {
      const child = spawn(command[0]!, command.slice(1), {
        cwd: join(rt.dir, 'containers', c.name),
        env: c.env,
        stdio: 'ignore',
        detached: true,
      });
      const timer = later(() => {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          // gone
        }
      }, timeoutMs);
      child.on('error', () => {
        clearTimeout(timer);
        resolve(127);
      });
      child.on('exit', (code, signal) => {
        clearTimeout(timer);
        resolve(code ?? (signal ? 137 : 1));
      });
    });
  }

  // ---- stopping and restarting ---------------------------------------------------------------

  async #killForRestart(rt: PodRuntime, c: Container, kind: 'startup' | 'liveness', spec: any): Promise<void> {
    if (rt.terminating || c.killing) return;
    this.#events.record(rt.pod, 'Normal', 'Killing', `Container ${c.name} failed ${kind} probe, will be restarted`, { host: rt.node, fieldPath: `spec.containers{${c.name}}` });
    const grace = spec.terminationGracePeriodSeconds ?? rt.pod.spec.terminationGracePeriodSeconds ?? 30;
    await this.#killContainer(rt, c, this.#scaled(rt, grace, 0));
  }

  /**
   * preStop, SIGTERM, the rest of the grace period (at least the kubelet's 2 s), SIGKILL. A shorter
   * grace period given meanwhile (c.grace.shorten) ends the preStop's time and the rest sooner.
   */
  async #killContainer(rt: PodRuntime, c: Container, graceMs: number): Promise<void> {
    const proc = c.proc;
    if (!proc || proc.exit) return;
    c.killing = true;
    for (const p of c.probes) if (p.kind !== 'readiness') this.#stopProbe(p);
    const grace = (c.grace = new GraceDeadline(Date.now() + graceMs));
    const preStop = c.spec.lifecycle?.preStop;
    if (preStop) {
      await Promise.race([this.#runPreStop(rt, c, preStop, graceMs), grace.passed(), proc.exited]);
    }
    const minimum = this.#scaled(rt, 2, 100);
    signalProcess(proc, 'SIGTERM');
    void grace.passed(Date.now() + minimum).then(() => {
      if (!proc.exit) killProcessGroup(proc);
    });
    await proc.exited;
    if (c.grace === grace) c.grace = undefined;
  }

  /**
   * A preStop sleep is there for the endpoints to drop the pod before it stops serving. Scaled
   * down, it is never shorter than 2 s (or the sleep itself): on a busy 2-core machine the
   * EndpointSlice update can take over a second to reach a client, and a shorter sleep would make
   * clients fail in a way a real cluster's 5 s does not.
   */
  #preStopSleep(rt: PodRuntime, seconds: number): number {
    return this.#scaled(rt, seconds, Math.min(seconds * 1000, 2000));
  }

  async #runPreStop(rt: PodRuntime, c: Container, hook: any, limitMs: number): Promise<void> {
    try {
      if (hook.exec) {
        const cmd: string[] = hook.exec.command ?? [];
        if (/(^|\/)sleep$/.test(cmd[0] ?? '') && cmd.length === 2 && /^\d+(\.\d+)?$/.test(cmd[1]!)) {
          await sleep(this.#preStopSleep(rt, Number(cmd[1])));
          return;
        }
        const code = await this.#execOnHost(rt, c, cmd[0] && existsSync(cmd[0]) ? cmd : ['/bin/sh', '-c', cmd.join(' ')], limitMs);
        if (code !== 0) {
          this.#events.record(rt.pod, 'Warning', 'FailedPreStopHook', `PreStopHook failed: command ${JSON.stringify(cmd)} exited with ${code}`, { host: rt.node });
        }
      } else if (hook.sleep) {
        await sleep(this.#preStopSleep(rt, Number(hook.sleep.seconds ?? 0)));
      } else if (hook.httpGet) {
        await this.#probe(rt, c, { httpGet: hook.httpGet }, limitMs);
      }
    } catch (e) {
      this.#o.log(`kubelet ${rt.key}: preStop: ${(e as Error).message}`);
    }
  }

  #onExit(rt: PodRuntime, c: Container, proc: Proc, exit: ExitInfo): void {
    if (c.proc !== proc) return;
    for (const p of c.probes) this.#stopProbe(p);
    c.probes = [];
    c.ready = false;
    c.started = false;
    c.killing = false;
    const startedAt = c.state.kind === 'running' ? c.state.startedAt : time();
    c.state = {
      kind: 'terminated',
      exitCode: exit.exitCode,
      signal: exit.signal ? exit.exitCode - 128 : undefined,
      reason: exit.exitCode === 0 ? 'Completed' : 'Error',
      startedAt,
      finishedAt: time(),
      containerID: c.containerID,
    };
    appendFileSync(proc.logPath, `--- test bed: ${time()} container ${c.name} exited with code ${exit.exitCode}${exit.signal ? ` (${exit.signal})` : ''}\n`);
    if (rt.terminating || rt.gone || this.#stopping) {
      return;
    }
    const policy = rt.pod.spec.restartPolicy ?? 'Always';
    const restart = policy === 'Always' || (policy === 'OnFailure' && exit.exitCode !== 0);
    if (!restart || c.hold) {
      this.#writeStatus(rt);
      return;
    }
    this.#scheduleRestart(rt, c);
  }

  #backoffNext(rt: PodRuntime, c: Container, now: number): void {
    const initial = this.#scaled(rt, 10);
    const max = this.#scaled(rt, 300);
    if (!c.backoff || now - c.backoff.lastUpdate > 2 * max) c.backoff = { ms: initial, lastUpdate: now };
    else c.backoff = { ms: Math.min(c.backoff.ms * 2, max), lastUpdate: now };
  }

  /** The kubelet's CrashLoopBackOff: the first restart at once, then 10 s doubling to 5 min. */
  #scheduleRestart(rt: PodRuntime, c: Container): void {
    if (!this.#o.nodes.isUp(rt.node)) {
      c.restartWhenUp = true;
      return;
    }
    const now = Date.now();
    const max = this.#scaled(rt, 300);
    const b = c.backoff;
    const inBackoff = b && !(now - b.lastUpdate > 2 * max);
    if (!inBackoff) {
      void this.#restart(rt, c);
      return;
    }
    const message = `back-off ${goDuration(b.ms / rt.factor)} restarting failed container=${c.name} pod=${rt.name}_${rt.ns}(${rt.uid})`;
    c.last = c.state.kind === 'terminated' ? c.state : c.last;
    c.state = { kind: 'waiting', reason: 'CrashLoopBackOff', message };
    this.#events.record(rt.pod, 'Warning', 'BackOff', `Back-off restarting failed container ${c.name} in pod ${rt.name}_${rt.ns}(${rt.uid})`, { host: rt.node, fieldPath: `spec.containers{${c.name}}` });
    this.#writeStatus(rt);
    c.restartTimer = later(() => {
      c.restartTimer = undefined;
      if (!rt.terminating && !rt.gone && !c.hold) void this.#restart(rt, c);
    }, b.ms);
  }

  #restart(rt: PodRuntime, c: Container): Promise<void> {
    this.#backoffNext(rt, c, Date.now());
    if (c.state.kind === 'terminated') c.last = c.state;
    c.restartCount++;
    c.state = { kind: 'waiting', reason: 'ContainerCreating' };
    return this.#startContainer(rt, c).catch((e) => {
      // The container waits (ContainerCreating) and the pod's next sync starts it.
      this.#o.log(`kubelet ${rt.key}: restart: ${(e as Error).stack ?? e}; syncing again later`);
      this.#retryLater(rt);
    });
  }

  async #terminate(rt: PodRuntime, graceMs: number): Promise<void> {
    rt.terminating = true;
    if (rt.retryTimer) clearTimeout(rt.retryTimer);
    for (const c of rt.containers) {
      if (c.restartTimer) clearTimeout(c.restartTimer);
      c.restartTimer = undefined;
      c.hold = false;
    }
    await Promise.all(
      rt.containers.map(async (c) => {
        if (c.proc && !c.proc.exit) {
          this.#events.record(rt.pod, 'Normal', 'Killing', `Stopping container ${c.name}`, { host: rt.node, fieldPath: `spec.containers{${c.name}}` });
          await this.#killContainer(rt, c, graceMs);
        }
      }),
    );
    rt.finished = true;
    if (!rt.gone && !this.#stopping) {
      // The final status (terminal phase), then the object goes.
      this.#writeStatus(rt);
      await rt.writing;
      await this.#deletePodObject(rt.pod);
    }
    this.#runtimes.delete(rt.uid);
    this.#o.network?.detach(rt.uid);
    this.#reportInUse(rt.node);
    rmSync(rt.dir, { recursive: true, force: true });
  }

  async #deletePodObject(pod: KObject): Promise<void> {
    try {
      await this.#o.kube.req('DELETE', `/api/v1/namespaces/${pod.metadata.namespace}/pods/${pod.metadata.name}`, {
        apiVersion: 'v1',
        kind: 'DeleteOptions',
        gracePeriodSeconds: 0,
        preconditions: { uid: pod.metadata.uid },
      });
    } catch (e) {
      if (!isNotFound(e) && !(e instanceof KubeError && e.status === 409)) this.#o.log(`kubelet: delete ${pod.metadata.namespace}/${pod.metadata.name}: ${(e as Error).message}`);
    }
  }

  // ---- status ------------------------------------------------------------------------------

  #containerStatus(rt: PodRuntime, c: Container): any {
    const stateOf = (s: State | undefined): any => {
      if (!s) return {};
      if (s.kind === 'waiting') return { waiting: s.message ? { reason: s.reason, message: s.message } : { reason: s.reason } };
      if (s.kind === 'running') return { running: { startedAt: s.startedAt } };
      return {
        terminated: {
          exitCode: s.exitCode,
          reason: s.reason,
          startedAt: s.startedAt,
          finishedAt: s.finishedAt,
          containerID: s.containerID,
        },
      };
    };
    return {
      name: c.name,
      image: c.spec.image,
      imageID: c.everStarted ? imageID(c.spec.image) : '',
      ...(c.containerID ? { containerID: c.containerID } : {}),
      ready: c.ready,
      started: c.started,
      restartCount: c.restartCount,
      state: stateOf(c.state),
      lastState: stateOf(c.last),
    };
  }

  #phase(rt: PodRuntime): string {
    const policy = rt.pod.spec.restartPolicy ?? 'Always';
    let running = 0;
    let waiting = 0;
    let stopped = 0;
    let succeeded = 0;
    for (const c of rt.containers) {
      if (c.state.kind === 'running') running++;
      else if (c.state.kind === 'terminated') {
        stopped++;
        if (c.state.exitCode === 0) succeeded++;
      } else if (c.last) stopped++;
      else waiting++;
    }
    if (rt.finished) return stopped === succeeded && succeeded === rt.containers.length ? 'Succeeded' : 'Failed';
    if (!rt.volumesReady) return 'Pending';
    if (running > 0) return 'Running';
    if (waiting > 0) return 'Pending';
    if (stopped > 0) {
      if (policy === 'Always') return 'Running';
      if (stopped === succeeded) return 'Succeeded';
      if (policy === 'Never') return 'Failed';
      return 'Running';
    }
    return 'Pending';
  }

  #condition(rt: PodRuntime, type: string, status: boolean, reason?: string, message?: string) {
    const s = status ? 'True' : 'False';
    const prev = rt.conditions.get(type);
    if (!prev || prev.status !== s) rt.conditions.set(type, { status: s, lastTransitionTime: time(), reason, message });
    else {
      prev.reason = reason;
      prev.message = message;
    }
    const c = rt.conditions.get(type)!;
    return {
      type,
      status: c.status,
      lastProbeTime: null,
      lastTransitionTime: c.lastTransitionTime,
      // A strategic merge patch keeps fields it does not mention: clear them when True.
      reason: (!status && reason) || null,
      message: (!status && message) || null,
    };
  }

  #statusBody(rt: PodRuntime): any {
    const unready = rt.containers.filter((c) => !c.ready).map((c) => c.name);
    const containersReady = unready.length === 0 && !rt.finished;
    const gates: string[] = (rt.pod.spec.readinessGates ?? []).map((g: any) => g.conditionType);
    const gateConds: any[] = rt.pod.status?.conditions ?? [];
    const gatesOk = gates.every((g) => gateConds.some((c) => c.type === g && c.status === 'True'));
    const sandbox = !!rt.ip && rt.volumesReady && !rt.finished;
    const unreadyMsg = `containers with unready status: [${unready.join(' ')}]`;
    const conditions = [
      this.#condition(rt, 'PodReadyToStartContainers', sandbox),
      this.#condition(rt, 'Initialized', rt.volumesReady || rt.finished || !(rt.pod.spec.initContainers ?? []).length),
      this.#condition(rt, 'Ready', containersReady && gatesOk, containersReady ? 'ReadinessGatesNotReady' : rt.finished ? 'PodCompleted' : 'ContainersNotReady', containersReady ? `the status of pod readiness gate is not "True", but False` : unreadyMsg),
      this.#condition(rt, 'ContainersReady', containersReady, rt.finished ? 'PodCompleted' : 'ContainersNotReady', unreadyMsg),
    ];
    const hostIP = this.#o.nodes.ipOf(rt.node);
    return {
      metadata: { uid: rt.uid },
      status: {
        phase: this.#phase(rt),
        conditions,
        hostIP,
        hostIPs: [{ ip: hostIP }],
        ...(rt.ip && rt.volumesReady ? { podIP: rt.ip, podIPs: [{ ip: rt.ip }] } : {}),
        startTime: rt.startTime,
        ...(rt.initStatuses.length ? { initContainerStatuses: rt.initStatuses } : {}),
        containerStatuses: rt.containers.map((c) => this.#containerStatus(rt, c)),
      },
    };
  }

  /** Writes the pod status if it changed; writes are serialised per pod, the last one wins. */
  #writeStatus(rt: PodRuntime): void {
    if (rt.gone || this.#stopping) return;
    if (!this.#o.nodes.isUp(rt.node)) return; // a node that is down reports nothing
    if (rt.writing) {
      rt.writeAgain = true;
      return;
    }
    const run = async () => {
      do {
        rt.writeAgain = false;
        const body = this.#statusBody(rt);
        const text = JSON.stringify(body);
        if (text === rt.lastWritten) continue;
        try {
          await this.#o.kube.req('PATCH', `/api/v1/namespaces/${rt.ns}/pods/${rt.name}/status`, body, {
            contentType: 'application/strategic-merge-patch+json',
          });
          rt.lastWritten = text;
        } catch (e) {
          if (isNotFound(e) || (e instanceof KubeError && e.status === 409)) {
            return; // gone, or a pod of the same name with another UID
          }
          this.#o.log(`kubelet ${rt.key}: status: ${(e as Error).message}`);
          await sleep(500);
          rt.writeAgain = true;
        }
      } while (rt.writeAgain && !rt.gone && !this.#stopping);
    };
    rt.writing = run().finally(() => {
      rt.writing = undefined;
    });
  }

  // ---- control API ---------------------------------------------------------------------------

  #find(ns: string, name: string): PodRuntime | undefined {
    let found: PodRuntime | undefined;
    const rank = (rt: PodRuntime) => (rt.gone ? 0 : rt.terminating ? 1 : 2);
    for (const rt of this.#runtimes.values()) if (rt.ns === ns && rt.name === name && (!found || rank(rt) >= rank(found))) found = rt;
    return found;
  }

  #info(rt: PodRuntime): PodInfo {
    const containers = rt.containers.map((c) => ({
      name: c.name,
      pid: c.proc && !c.proc.exit ? c.proc.pid : null,
      running: !!c.proc && !c.proc.exit,
      restarts: c.restartCount,
      lastExitCode: c.state.kind === 'terminated' ? c.state.exitCode : (c.last?.exitCode ?? null),
      held: c.hold,
      logPath: this.#logPath(rt, c),
      env: c.env,
      fleet: !!c.proc?.fleetNode,
    }));
    const main = containers.find((c) => /queen/i.test(rt.containers.find((x) => x.name === c.name)?.spec.image ?? '')) ?? containers[0]!;
    return {
      namespace: rt.ns,
      name: rt.name,
      uid: rt.uid,
      node: rt.node,
      ip: rt.ip ?? null,
      pid: main?.pid ?? null,
      running: main?.running ?? false,
      restarts: main?.restarts ?? 0,
      lastExitCode: main?.lastExitCode ?? null,
      held: main?.held ?? false,
      volumes: Object.fromEntries(rt.volumes),
      logPath: main?.logPath ?? '',
      fleet: main?.fleet ?? false,
      containers,
    };
  }

  /** The log file of a container (for the kubelet API's containerLogs). */
  logOf(ns: string, name: string, container?: string): { path: string; running: () => boolean } | undefined {
    const rt = this.#find(ns, name);
    if (!rt) return undefined;
    const c = container ? rt.containers.find((x) => x.name === container) : rt.containers[0];
    if (!c) return undefined;
    return { path: this.#logPath(rt, c), running: () => !!c.proc && !c.proc.exit && !rt.gone };
  }

  /** The pod object the kubelet runs under that name. */
  podObject(ns: string, name: string): KObject | undefined {
    return this.#find(ns, name)?.pod;
  }

  podInfo(ns: string, name: string): PodInfo | undefined {
    const rt = this.#find(ns, name);
    return rt ? this.#info(rt) : undefined;
  }

  pods(): PodInfo[] {
    return [...this.#runtimes.values()].map((rt) => this.#info(rt));
  }

  #target(ns: string, name: string, container?: string): { rt: PodRuntime; c: Container } {
    const rt = this.#find(ns, name);
    if (!rt) throw new Error(`no pod ${ns}/${name} on the simulated nodes`);
    const c = container ? rt.containers.find((x) => x.name === container) : rt.containers[0];
    if (!c) throw new Error(`no container ${container} in ${ns}/${name}`);
    return { rt, c };
  }

  /** Kills the container with a signal; with hold, it is not restarted until released. */
  async kill(ns: string, name: string, opts: { signal?: NodeJS.Signals; hold?: boolean; container?: string } = {}): Promise<PodInfo> {
    const { rt, c } = this.#target(ns, name, opts.container);
    if (opts.hold) c.hold = true;
    if (c.restartTimer && opts.hold) {
      clearTimeout(c.restartTimer);
      c.restartTimer = undefined;
    }
    const proc = c.proc;
    if (proc && !proc.exit) {
      const signal = opts.signal ?? 'SIGKILL';
      if (signal === 'SIGKILL') killProcessGroup(proc);
      else signalProcess(proc, signal);
      if (signal === 'SIGKILL') await proc.exited;
      else await Promise.race([proc.exited, sleep(200)]);
    }
    return this.#info(rt);
  }

  /** Lets a held container start again (at once). */
  async release(ns: string, name: string, opts: { container?: string } = {}): Promise<PodInfo> {
    const { rt, c } = this.#target(ns, name, opts.container);
    c.hold = false;
    if ((!c.proc || c.proc.exit) && !rt.terminating && !c.restartTimer) {
      const policy = rt.pod.spec.restartPolicy ?? 'Always';
      const exitCode = c.state.kind === 'terminated' ? c.state.exitCode : 1;
      if (policy === 'Always' || (policy === 'OnFailure' && exitCode !== 0)) await this.#restart(rt, c);
    }
    return this.#info(rt);
  }

  /** SIGKILL, empty the volume's folder behind everyone's back, restart on the empty folder. */
  async wipe(ns: string, name: string, volume: string, opts: { container?: string } = {}): Promise<PodInfo> {
    const { rt } = this.#target(ns, name, opts.container);
    const folder = rt.volumes.get(volume);
    if (!folder) throw new Error(`pod ${ns}/${name} has no volume ${volume}`);
    const wasHeld = this.#target(ns, name, opts.container).c.hold;
    await this.kill(ns, name, { signal: 'SIGKILL', hold: true, container: opts.container });
    for (const entry of readdirSync(folder)) rmSync(join(folder, entry), { recursive: true, force: true });
    this.#o.log(`kubelet ${rt.key}: wiped volume ${volume} (${folder})`);
    if (wasHeld) return this.#info(rt);
    return this.release(ns, name, opts);
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    if (this.#periodic) clearInterval(this.#periodic);
    const all: Promise<unknown>[] = [];
    for (const rt of this.#runtimes.values()) {
      if (rt.retryTimer) clearTimeout(rt.retryTimer);
      for (const c of rt.containers) {
        if (c.restartTimer) clearTimeout(c.restartTimer);
        for (const p of c.probes) this.#stopProbe(p);
        if (c.proc && !c.proc.exit) {
          killProcessGroup(c.proc);
          all.push(c.proc.exited);
        }
      }
    }
    await Promise.all(all);
    await this.fleets.stop();
  }
}

function writeJsonFile(file: string, value: unknown): void {
  writeFileSync(`${file}.tmp`, JSON.stringify(value));
  renameSync(`${file}.tmp`, file);
}

const kv = (m?: Record<string, string>) =>
  Object.keys(m ?? {})
    .sort()
    .map((k) => `${k}=${JSON.stringify(m![k])}`)
    .join('\n');

function imageID(image: string): string {
  const repo = image.replace(/[:@][^/]*$/, '');
  return `${repo}@sha256:${createHash('sha256').update(image).digest('hex')}`;
}

/** Whether two lists of pod conditions differ in the status of a condition type. */
function conditionsDiffer(held: { type: string; status: string }[] | undefined, written: { type: string; status: string }[] | undefined): boolean {
  const statuses = (cs: { type: string; status: string }[] | undefined) => new Map((cs ?? []).map((c) => [c.type, c.status]));
  const a = statuses(held);
  const b = statuses(written);
  return [...b].some(([type, status]) => a.get(type) !== status);
}
