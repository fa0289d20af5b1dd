// Volume snapshots of the test bed's storage: the CSI driver's part, as the csi-snapshotter sidecar
// plays it beside a real driver. The real snapshot controller (the external-snapshotter's
// cmd/snapshot-controller, built by build-tools.sh) turns each VolumeSnapshot into a
// VolumeSnapshotContent; this acts on the contents of our driver:
//
// - a dynamic content (spec.source.volumeHandle) without status: the volume's folder is copied,
//   with the processes of the pods that mount it frozen (SIGSTOP) for the copy, so the copy is what
//   a crash at that moment would leave on the disk (crash-consistent, as a driver's snapshot is);
//   then status: snapshotHandle, creationTime, restoreSize (the source volume's capacity, the least
//   size a volume made from it can have, as block storage reports it) and readyToUse;
// - a class whose parameter `fail` is set: the driver refuses, in those words; the content's
//   status.error says so (the snapshot controller copies it to the VolumeSnapshot) with a Warning
//   SnapshotCreationFailed, and it is tried again every 5 s (× the time factor), as the sidecar
//   retries; a parameter `readySeconds` reports readyToUse false for that long first (a snapshot
//   still being uploaded);
// - a content being deleted (policy Delete): the copy is deleted, then the sidecar's finalizer.
//
// Storage.provision() makes a claim whose dataSource is a VolumeSnapshot from the copy (snapshotFolder).
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { Chains } from './chains.ts';
import { EventRecorder } from './events.ts';
import { isConflict, isNotFound, KubeError, parseQuantity, type Informer, type KObject, type Kube } from './kube.ts';

export const SNAPSHOT_API = '/apis/snapshot.storage.k8s.io/v1';
/** The default class, and one whose driver refuses every snapshot (the failure a test needs). */
export const SNAPSHOT_CLASS = 'queen-snapshots';
export const FAILING_SNAPSHOT_CLASS = 'queen-snapshots-failing';
export const FAILING_SNAPSHOT_MESSAGE = 'the snapshot store is out of quota (test bed)';
const CONTENT_FINALIZER = 'snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection';
const BEING_CREATED = 'snapshot.storage.kubernetes.io/volumesnapshot-being-created';
const BEING_DELETED = 'snapshot.storage.kubernetes.io/volumesnapshot-being-deleted';

/**
 * Installs the VolumeSnapshot definitions (the external-snapshotter client module's YAML files, as
 * build-tools.sh keeps them) and waits until the API server serves them.
 */
export async function installSnapshotCrds(kube: Kube, files: string[]): Promise<void> {
  const names: string[] = [];
  for (const file of files) {
    const crd = parse(readFileSync(file, 'utf8')) as KObject;
    names.push(crd.metadata.name);
    try {
      await kube.create('/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd);
    } catch (e) {
      if (!isConflict(e)) throw e;
    }
  }
  const deadline = Date.now() + 60_000;
  for (const name of names) {
    for (;;) {
      const crd = await kube.getOrNull(`/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`);
      if ((crd as any)?.status?.conditions?.some((c: any) => c.type === 'Established' && c.status === 'True')) break;
      if (Date.now() > deadline) throw new Error(`the definition ${name} was not established within 60 s`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

export interface SnapshotHooks {
  /** Freezes the processes of the pods that mount this claim; the function returned thaws them. */
  freezeClaim?: (ns: string, claim: string) => () => void;
}

export class Snapshots {
  #kube: Kube;
  #contents: Informer<KObject>;
  #pvs: Informer<KObject>;
  #root: string;
  #log: (line: string) => void;
  #chains: Chains;
  #classes = new Map<string, KObject>();
  #recorder: EventRecorder;
  hooks: SnapshotHooks = {};
  timeFactor = 1;

  constructor(kube: Kube, contents: Informer<KObject>, pvs: Informer<KObject>, dir: string, log: (line: string) => void) {
    this.#kube = kube;
    this.#contents = contents;
    this.#pvs = pvs;
    this.#root = join(dir, 'snapshots');
    this.#log = log;
    this.#chains = new Chains('snapshots', log);
    this.#recorder = new EventRecorder(kube, 'csi-snapshotter testbed.queen.local');
    mkdirSync(this.#root, { recursive: true });
  }

  /** The snapshot classes of the test bed's driver; idempotent. */
  async install(driver: string): Promise<void> {
    const classes = [
      {
        apiVersion: 'snapshot.storage.k8s.io/v1',
        kind: 'VolumeSnapshotClass',
        metadata: { name: SNAPSHOT_CLASS, annotations: { 'snapshot.storage.kubernetes.io/is-default-class': 'true' } },
        driver,
        deletionPolicy: 'Delete',
      },
      {
        apiVersion: 'snapshot.storage.k8s.io/v1',
        kind: 'VolumeSnapshotClass',
        metadata: { name: FAILING_SNAPSHOT_CLASS },
        driver,
        deletionPolicy: 'Delete',
        parameters: { fail: FAILING_SNAPSHOT_MESSAGE },
      },
    ];
    for (const c of classes) {
      try {
        await this.#kube.create(`${SNAPSHOT_API}/volumesnapshotclasses`, c);
      } catch (e) {
        if (!isConflict(e)) throw e;
      }
    }
  }

  start(driver: string): void {
    const sync = (c: KObject) => {
      if ((c as any).spec?.driver !== driver) return;
      this.#enqueue(c.metadata.name, () => this.#sync(c.metadata.name));
    };
    this.#contents.on({ add: sync, update: sync });
    for (const c of this.#contents.list()) sync(c);
  }

  idle(): Promise<void> {
    return this.#chains.idle();
  }

  /** The folder holding the copy a snapshot handle names, or null when there is none. */
  snapshotFolder(handle: string): string | null {
    const folder = join(this.#root, handle);
    return /^[a-z0-9-]+$/.test(handle) && existsSync(folder) ? folder : null;
  }

  #enqueue(key: string, fn: () => Promise<void>): void {
    this.#chains.enqueue(key, fn);
  }

  #later(name: string, seconds: number): void {
    setTimeout(() => this.#enqueue(name, () => this.#sync(name)), Math.max(200, seconds * 1000 * this.timeFactor)).unref();
  }

  async #class(name: string | undefined): Promise<KObject | null> {
    if (!name) return null;
    const cached = this.#classes.get(name);
    if (cached) return cached;
    const c = await this.#kube.getOrNull(`${SNAPSHOT_API}/volumesnapshotclasses/${name}`);
    if (c) this.#classes.set(name, c);
    return c;
  }

  async #sync(name: string): Promise<void> {
    const content = this.#contents.get(name);
    if (!content) return;
    const spec = (content as any).spec ?? {};
    const status = (content as any).status;
    const ann = content.metadata.annotations ?? {};
    if (content.metadata.deletionTimestamp) {
      if (ann[BEING_CREATED] || !ann[BEING_DELETED]) return;
      if (spec.deletionPolicy === 'Delete' && status?.snapshotHandle) {
        rmSync(join(this.#root, status.snapshotHandle), { recursive: true, force: true });
        this.#log(`snapshots: deleted ${status.snapshotHandle} (${name})`);
        await this.#kube.mergePatch(`${SNAPSHOT_API}/volumesnapshotcontents/${name}/status`, {
          status: { snapshotHandle: null, readyToUse: null, creationTime: null, restoreSize: null },
        });
      }
      const fins: string[] = content.metadata.finalizers ?? [];
      const i = fins.indexOf(CONTENT_FINALIZER);
      if (i >= 0) {
        try {
          await this.#kube.jsonPatch(`${SNAPSHOT_API}/volumesnapshotcontents/${name}`, [
            { op: 'test', path: `/metadata/finalizers/${i}`, value: CONTENT_FINALIZER },
            { op: 'remove', path: `/metadata/finalizers/${i}` },
          ]);
        } catch (e) {
          if (!isNotFound(e) && !(e instanceof KubeError && e.status === 422)) throw e;
        }
      }
      return;
    }
    if (!spec.source?.volumeHandle) return; // a pre-provisioned content: nothing to take
    if (status?.snapshotHandle) {
      if (status.readyToUse !== true) await this.#maybeReady(content);
      return;
    }
    await this.#take(content);
  }

  async #take(content: KObject): Promise<void> {
    const name = content.metadata.name;
    const spec = (content as any).spec;
    const volumeHandle: string = spec.source.volumeHandle;
    const cls = await this.#class(spec.volumeSnapshotClassName);
    const params: Record<string, string> = (cls as any)?.parameters ?? {};
    const path = `${SNAPSHOT_API}/volumesnapshotcontents/${name}`;
    if (params.fail) {
      // A final error of the driver: the sidecar reports it (status.error, a Warning) and tries again later.
      const message = `Failed to create snapshot: failed to take snapshot of the volume ${volumeHandle}: "rpc error: code = Internal desc = ${params.fail}"`;
      if ((content as any).status?.error?.message !== message) {
        await this.#kube.mergePatch(`${path}/status`, { status: { readyToUse: false, error: { time: new Date().toISOString(), message } } });
        this.#recorder.record({ ...content, kind: 'VolumeSnapshotContent', apiVersion: 'snapshot.storage.k8s.io/v1' }, 'Warning', 'SnapshotCreationFailed', message);
        this.#log(`snapshots: ${name} failed: ${params.fail}`);
      }
      this.#later(name, 5);
      return;
    }
    const pv = [...this.#pvs.list()].find((v) => v.spec?.csi?.volumeHandle === volumeHandle) ?? null;
    const source: string | undefined = pv?.spec?.csi?.volumeAttributes?.path;
    if (!pv || !source) {
      const message = `Failed to create snapshot: failed to take snapshot of the volume ${volumeHandle}: "rpc error: code = NotFound desc = no volume ${volumeHandle}"`;
      await this.#kube.mergePatch(`${path}/status`, { status: { readyToUse: false, error: { time: new Date().toISOString(), message } } });
      this.#later(name, 5);
      return;
    }
    await this.#kube.mergePatch(path, { metadata: { annotations: { [BEING_CREATED]: 'yes' } } });
    const handle = `snap-${content.metadata.uid}`;
    const target = join(this.#root, handle);
    // The copy is made with the pods that write the volume frozen: what a crash at this moment leaves.
    const claim = pv.spec?.claimRef;
    const thaw = claim ? this.hooks.freezeClaim?.(claim.namespace, claim.name) : undefined;
    const began = performance.now();
    try {
      rmSync(target, { recursive: true, force: true });
      if (existsSync(source)) cpSync(source, target, { recursive: true, preserveTimestamps: true });
      else mkdirSync(target, { recursive: true });
    } finally {
      thaw?.();
    }
    const copyMs = performance.now() - began;
    const restoreSize = parseQuantity(pv.spec?.capacity?.storage ?? '0');
    const ready = !(Number(params.readySeconds) > 0);
    await this.#kube.mergePatch(`${path}/status`, {
      status: { snapshotHandle: handle, creationTime: Date.now() * 1_000_000, restoreSize, readyToUse: ready, error: null },
    });
    await this.#kube.mergePatch(path, { metadata: { annotations: { [BEING_CREATED]: null } } });
    this.#log(`snapshots: took ${handle} of ${volumeHandle} (${claim ? `${claim.namespace}/${claim.name}` : 'no claim'}) in ${copyMs.toFixed(1)} ms, frozen meanwhile`);
    if (!ready) this.#later(name, Number(params.readySeconds));
  }

  async #maybeReady(content: KObject): Promise<void> {
    const cls = await this.#class((content as any).spec?.volumeSnapshotClassName);
    const seconds = Number((cls as any)?.parameters?.readySeconds ?? 0);
    const created = Number((content as any).status?.creationTime ?? 0) / 1_000_000;
    const left = created + seconds * 1000 * this.timeFactor - Date.now();
    if (left > 0) {
      this.#later(content.metadata.name, left / 1000 / this.timeFactor);
      return;
    }
    await this.#kube.mergePatch(`${SNAPSHOT_API}/volumesnapshotcontents/${content.metadata.name}/status`, { status: { readyToUse: true } });
  }
}
