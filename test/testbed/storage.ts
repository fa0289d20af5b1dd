// Simulated storage: two StorageClasses, and an external provisioner and resizer for them (what a
// CSI driver's external-provisioner and external-resizer sidecars do), each volume a folder under
// the test bed dir. The real PV controller binds claims to the volumes this creates, the real
// PVC-protection controller holds claims while pods use them, and the real admission plugin
// refuses to grow a claim of the fixed class.
import { createHash } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { EventRecorder } from './events.ts';
import { isConflict, isNotFound, KubeError, parseQuantity, type Informer, type KObject, type Kube } from './kube.ts';

export const PROVISIONER = 'testbed.queen.local';
export const EXPANDABLE_CLASS = 'queen-expandable';
export const FIXED_CLASS = 'queen-fixed';
const FINALIZER = 'external-provisioner.volume.kubernetes.io/finalizer';
const RESIZE_PENDING_MESSAGE = 'Waiting for user to (re-)start a pod to finish file system resize of volume on node.';

const now = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');


export class Storage {
  #kube: Kube;
  #pvcs: Informer<KObject>;
  #pvs: Informer<KObject>;
  #classes = new Map<string, KObject>();
  #root: string;
  #log: (line: string) => void;
  #chains = new Map<string, Promise<void>>();
  /** Share (0..1) of volumes whose growth waits for a pod restart (FileSystemResizePending). */
  resizePendingShare = 0;
  /** The same, for the claims of one namespace (tests running side by side set their own). */
  resizePendingShareByNamespace = new Map<string, number>();
  onChange: (() => void) | undefined;
  #recorders: Record<'provisioner' | 'resizer' | 'kubelet', EventRecorder>;

  constructor(kube: Kube, pvcs: Informer<KObject>, pvs: Informer<KObject>, dir: string, log: (line: string) => void) {
    this.#kube = kube;
    this.#pvcs = pvcs;
    this.#pvs = pvs;
    this.#root = join(dir, 'volumes');
    this.#log = log;
    this.#recorders = {
      provisioner: new EventRecorder(kube, `${PROVISIONER}_testbed`),
      resizer: new EventRecorder(kube, 'external-resizer testbed.queen.local'),
      kubelet: new EventRecorder(kube, 'kubelet'),
    };
    mkdirSync(this.#root, { recursive: true });
  }

  /** The StorageClasses and the CSIDriver object; idempotent. */
  async install(): Promise<void> {
    const classes: KObject[] = [
      {
        apiVersion: 'storage.k8s.io/v1',
        kind: 'StorageClass',
        metadata: { name: EXPANDABLE_CLASS, annotations: { 'storageclass.kubernetes.io/is-default-class': 'true' } },
        provisioner: PROVISIONER,
        reclaimPolicy: 'Delete',
        volumeBindingMode: 'Immediate',
        allowVolumeExpansion: true,
      },
      {
        apiVersion: 'storage.k8s.io/v1',
        kind: 'StorageClass',
        metadata: { name: FIXED_CLASS },
        provisioner: PROVISIONER,
        reclaimPolicy: 'Delete',
        volumeBindingMode: 'Immediate',
        allowVolumeExpansion: false,
      },
    ];
    const driver = {
      apiVersion: 'storage.k8s.io/v1',
      kind: 'CSIDriver',
      metadata: { name: PROVISIONER },
      spec: { attachRequired: false, podInfoOnMount: false, volumeLifecycleModes: ['Persistent'], fsGroupPolicy: 'None' },
    };
    const create = async (path: string, body: unknown) => {
      try {
        await this.#kube.create(path, body);
      } catch (e) {
        if (!isConflict(e)) throw e;
      }
    };
    await Promise.all([
      ...classes.map((c) => create('/apis/storage.k8s.io/v1/storageclasses', c)),
      create('/apis/storage.k8s.io/v1/csidrivers', driver),
    ]);
    for (const c of classes) this.#classes.set(c.metadata.name, c);
  }

  start(): void {
    this.#pvcs.on({
      add: (pvc) => this.#enqueue(`pvc/${pvc.metadata.uid}`, () => this.#syncClaim(pvc.metadata.namespace!, pvc.metadata.name)),
      update: (pvc) => this.#enqueue(`pvc/${pvc.metadata.uid}`, () => this.#syncClaim(pvc.metadata.namespace!, pvc.metadata.name)),
    });
    this.#pvs.on({
      add: (pv) => this.#enqueue(`pv/${pv.metadata.name}`, () => this.#syncVolume(pv.metadata.name)),
      update: (pv) => this.#enqueue(`pv/${pv.metadata.name}`, () => this.#syncVolume(pv.metadata.name)),
    });
    for (const pvc of this.#pvcs.list()) this.#enqueue(`pvc/${pvc.metadata.uid}`, () => this.#syncClaim(pvc.metadata.namespace!, pvc.metadata.name));
    for (const pv of this.#pvs.list()) this.#enqueue(`pv/${pv.metadata.name}`, () => this.#syncVolume(pv.metadata.name));
  }

  async idle(): Promise<void> {
    while (this.#chains.size) await Promise.all([...this.#chains.values()]);
  }

  #enqueue(key: string, fn: () => Promise<void>): void {
    const prev = this.#chains.get(key) ?? Promise.resolve();
    const next = prev
      .then(fn)
      .catch((e) => this.#log(`storage ${key}: ${(e as Error).message}`))
      .finally(() => {
        if (this.#chains.get(key) === next) this.#chains.delete(key);
        this.onChange?.();
      });
    this.#chains.set(key, next);
  }

  async #storageClass(name: string | undefined): Promise<KObject | null> {
    if (!name) return null;
    const cached = this.#classes.get(name);
    if (cached) return cached;
    const sc = await this.#kube.getOrNull(`/apis/storage.k8s.io/v1/storageclasses/${name}`);
    if (sc) this.#classes.set(name, sc);
    return sc;
  }

  folderOf(pvName: string): string {
    return join(this.#root, pvName);
  }

  /** Share test: a stable decision per volume, so a volume behaves the same on every growth. */
  #resizeNeedsRestart(pvName: string, namespace: string): boolean {
    const share = this.resizePendingShareByNamespace.get(namespace) ?? this.resizePendingShare;
    if (share <= 0) return false;
    if (share >= 1) return true;
    const h = createHash('sha256').update(pvName).digest().readUInt32BE(0);
    return h / 2 ** 32 < share;
  }

  #event(obj: KObject, type: 'Normal' | 'Warning', reason: string, message: string, component: 'provisioner' | 'resizer' | 'kubelet'): void {
    this.#recorders[component].record({ ...obj, kind: 'PersistentVolumeClaim' }, type, reason, message);
  }

  async #syncClaim(ns: string, name: string): Promise<void> {
    const pvc = this.#pvcs.get(`${ns}/${name}`);
    if (!pvc || pvc.metadata.deletionTimestamp) return;
    const ann = pvc.metadata.annotations ?? {};
    const provisioner = ann['volume.kubernetes.io/storage-provisioner'] ?? ann['volume.beta.kubernetes.io/storage-provisioner'];
    if (!pvc.spec?.volumeName) {
      if (provisioner === PROVISIONER) await this.#provision(pvc);
      return;
    }
    if (pvc.status?.phase === 'Bound') await this.#maybeResize(pvc);
  }

  async #provision(pvc: KObject): Promise<void> {
    const pvName = `pvc-${pvc.metadata.uid}`;
    if (this.#pvs.get(pvName)) return;
    const sc = await this.#storageClass(pvc.spec?.storageClassName);
    if (!sc || (sc as any).provisioner !== PROVISIONER) return;
    const folder = this.folderOf(pvName);
    mkdirSync(folder, { recursive: true });
    const pv = {
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: {
        name: pvName,
        annotations: { 'pv.kubernetes.io/provisioned-by': PROVISIONER, 'volume.kubernetes.io/provisioner-deletion-secret-name': '', 'volume.kubernetes.io/provisioner-deletion-secret-namespace': '' },
        finalizers: [FINALIZER],
      },
      spec: {
        capacity: { storage: pvc.spec.resources?.requests?.storage ?? '1Gi' },
        accessModes: pvc.spec.accessModes ?? ['ReadWriteOnce'],
        persistentVolumeReclaimPolicy: (sc as any).reclaimPolicy ?? 'Delete',
        storageClassName: sc.metadata.name,
        volumeMode: pvc.spec.volumeMode ?? 'Filesystem',
        mountOptions: (sc as any).mountOptions,
        claimRef: {
          apiVersion: 'v1',
          kind: 'PersistentVolumeClaim',
          namespace: pvc.metadata.namespace,
          name: pvc.metadata.name,
          uid: pvc.metadata.uid,
          resourceVersion: pvc.metadata.resourceVersion,
        },
        csi: { driver: PROVISIONER, volumeHandle: pvName, fsType: 'ext4', volumeAttributes: { path: folder } },
      },
    };
    try {
      await this.#kube.create('/api/v1/persistentvolumes', pv);
      this.#log(`storage: provisioned ${pvName} for ${pvc.metadata.namespace}/${pvc.metadata.name} in ${folder}`);
      this.#event(pvc, 'Normal', 'ProvisioningSucceeded', `Successfully provisioned volume ${pvName}`, 'provisioner');
    } catch (e) {
      if (!isConflict(e)) throw e;
    }
  }

  async #maybeResize(pvc: KObject): Promise<void> {
    const sc = await this.#storageClass(pvc.spec?.storageClassName);
    if (!sc || (sc as any).provisioner !== PROVISIONER || (sc as any).allowVolumeExpansion !== true) return;
    const wantStr: string | undefined = pvc.spec.resources?.requests?.storage;
    const haveStr: string | undefined = pvc.status?.capacity?.storage;
    if (!wantStr || !haveStr) return;
    const want = parseQuantity(wantStr);
    if (want <= parseQuantity(haveStr)) return;
    const allocated = pvc.status?.allocatedResources?.storage;
    const pending = (pvc.status?.conditions ?? []).some((c: any) => c.type === 'FileSystemResizePending');
    if (pending && allocated && parseQuantity(allocated) >= want) return; // waits for the kubelet
    const pvName: string = pvc.spec.volumeName;
    const pv = this.#pvs.get(pvName) ?? (await this.#kube.getOrNull(`/api/v1/persistentvolumes/${pvName}`));
    if (!pv || pv.metadata.annotations?.['pv.kubernetes.io/provisioned-by'] !== PROVISIONER) return;
    const path = `/api/v1/namespaces/${pvc.metadata.namespace}/persistentvolumeclaims/${pvc.metadata.name}/status`;
    await this.#kube.mergePatch(path, {
      status: {
        allocatedResources: { storage: wantStr },
        allocatedResourceStatuses: { storage: 'ControllerResizeInProgress' },
      },
    });
    if (parseQuantity(pv.spec?.capacity?.storage) < want) {
      await this.#kube.mergePatch(`/api/v1/persistentvolumes/${pvName}`, { spec: { capacity: { storage: wantStr } } });
    }
    const others = (pvc.status?.conditions ?? []).filter((c: any) => c.type !== 'Resizing' && c.type !== 'FileSystemResizePending');
    if (this.#resizeNeedsRestart(pvName, pvc.metadata.namespace!)) {
      await this.#kube.mergePatch(path, {
        status: {
          allocatedResourceStatuses: { storage: 'NodeResizePending' },
          conditions: [...others, { type: 'FileSystemResizePending', status: 'True', lastProbeTime: null, lastTransitionTime: now(), message: RESIZE_PENDING_MESSAGE }],
        },
      });
      this.#event(pvc, 'Normal', 'FileSystemResizeRequired', 'Require file system resize of volume on node', 'resizer');
      this.#log(`storage: ${pvName} grown to ${wantStr}; file system resize pending until a pod starts`);
    } else {
      await this.#kube.mergePatch(path, {
        status: { capacity: { storage: wantStr }, allocatedResourceStatuses: null, conditions: others.length ? others : null },
      });
      this.#event(pvc, 'Normal', 'VolumeResizeSuccessful', `resize volume "${pvName}" by resizer "${PROVISIONER}" finished successfully`, 'resizer');
      this.#log(`storage: ${pvName} grown to ${wantStr}`);
    }
  }

  /**
   * The node side of a growth (the kubelet calls this when a pod mounting the claim starts): the
   * file system now has the new size.
   */
  async finishNodeResize(ns: string, claimName: string): Promise<void> {
    const pvc = await this.#kube.getOrNull(`/api/v1/namespaces/${ns}/persistentvolumeclaims/${claimName}`);
    if (!pvc) return;
    const conds: any[] = pvc.status?.conditions ?? [];
    if (!conds.some((c) => c.type === 'FileSystemResizePending')) return;
    const pv = pvc.spec?.volumeName ? this.#pvs.get(pvc.spec.volumeName) : undefined;
    const size = pvc.status?.allocatedResources?.storage ?? pv?.spec?.capacity?.storage ?? pvc.spec.resources?.requests?.storage;
    const others = conds.filter((c) => c.type !== 'FileSystemResizePending' && c.type !== 'Resizing');
    await this.#kube.mergePatch(`/api/v1/namespaces/${ns}/persistentvolumeclaims/${claimName}/status`, {
      status: { capacity: { storage: size }, allocatedResourceStatuses: null, conditions: others.length ? others : null },
    });
    this.#event(pvc, 'Normal', 'FileSystemResizeSuccessful', `MountVolume.NodeExpandVolume succeeded for volume "${pvc.spec.volumeName}"`, 'kubelet');
    this.#log(`storage: file system of ${ns}/${claimName} resized to ${size}`);
  }

  async #syncVolume(pvName: string): Promise<void> {
    const pv = this.#pvs.get(pvName);
    if (!pv || pv.metadata.annotations?.['pv.kubernetes.io/provisioned-by'] !== PROVISIONER) return;
    const released = pv.status?.phase === 'Released' && pv.spec?.persistentVolumeReclaimPolicy === 'Delete';
    const deleting = !!pv.metadata.deletionTimestamp;
    if (!released && !deleting) return;
    if (deleting && pv.spec?.persistentVolumeReclaimPolicy !== 'Delete' && !released) {
      // Retained volume deleted by hand: the data stays, only our finalizer goes.
      await this.#dropFinalizer(pv);
      return;
    }
    rmSync(pv.spec?.csi?.volumeAttributes?.path ?? this.folderOf(pvName), { recursive: true, force: true });
    this.#log(`storage: deleted volume ${pvName} and its folder`);
    await this.#dropFinalizer(pv);
    if (!deleting) await this.#kube.delete(`/api/v1/persistentvolumes/${pvName}`);
  }

  async #dropFinalizer(pv: KObject): Promise<void> {
    const fins = pv.metadata.finalizers ?? [];
    const i = fins.indexOf(FINALIZER);
    if (i < 0) return;
    try {
      await this.#kube.jsonPatch(`/api/v1/persistentvolumes/${pv.metadata.name}`, [
        { op: 'test', path: `/metadata/finalizers/${i}`, value: FINALIZER },
        { op: 'remove', path: `/metadata/finalizers/${i}` },
      ]);
    } catch (e) {
      // gone, or the list moved under us (the next event retries)
      if (isNotFound(e) || (e instanceof KubeError && e.status === 422)) return;
      throw e;
    }
  }

  /** The folder behind a claim, once it is bound to a volume of ours. */
  claimFolder(ns: string, claimName: string): { folder: string; pvc: KObject; pv: KObject } | { waiting: string } {
    const pvc = this.#pvcs.get(`${ns}/${claimName}`);
    if (!pvc) return { waiting: `persistentvolumeclaim "${claimName}" not found` };
    if (pvc.status?.phase !== 'Bound' || !pvc.spec?.volumeName) return { waiting: `persistentvolumeclaim "${claimName}" is not bound` };
    const pv = this.#pvs.get(pvc.spec.volumeName);
    if (!pv) return { waiting: `persistentvolume "${pvc.spec.volumeName}" not found` };
    const folder = pv.spec?.csi?.volumeAttributes?.path ?? pv.spec?.hostPath?.path ?? pv.spec?.local?.path;
    if (!folder) return { waiting: `persistentvolume "${pv.metadata.name}" has no folder on this test bed` };
    mkdirSync(folder, { recursive: true });
    return { folder, pvc, pv };
  }
}
