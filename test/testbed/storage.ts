// Simulated storage: four StorageClasses, and an external provisioner, attacher and resizer for
// them (what a CSI driver's external-provisioner, external-attacher and external-resizer sidecars
// do), each volume a folder under the test bed dir. The real PV controller binds claims to the
// volumes this creates, the real attach/detach controller attaches a volume to the node of the pod
// that uses it (VolumeAttachments; a volume attached to a node that went away stays attached
// until that node is back, its 6-minute force detach, or the out-of-service taint), the real
// PVC-protection controller holds claims while pods use them, and the real admission plugin
// refuses to grow a claim of the fixed class.
//
//   queen-expandable (default)  grows; for a chosen share of volumes the file system waits for a
//                               pod to start (FileSystemResizePending), the others at once. As a
//                               current kubelet does, the node tries to grow such a mounted file
//                               system and says it cannot (NodeResizeError); a node set silent
//                               (an older kubelet) does not say
//   queen-online                grows while the pod runs: the node expands the file system of a
//                               mounted volume in a moment, and the simulator sees the new size
//   queen-limited               grows up to 2Gi (parameter maxSize); a larger size is accepted by
//                               the API server, then refused by the resizer (ControllerResizeInfeasible)
//   queen-fixed                 does not allow expansion
//
// A claim whose dataSource is a VolumeSnapshot (of this driver, snapshots.ts) is provisioned as a
// copy of the snapshot's folder, once the snapshot is ready and no larger than the claim.
import { createHash } from 'node:crypto';
import { cpSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Chains } from './chains.ts';
import { EventRecorder } from './events.ts';
import { isConflict, isNotFound, KubeError, parseQuantity, type Informer, type KObject, type Kube } from './kube.ts';
import { SNAPSHOT_API, type Snapshots } from './snapshots.ts';

export const PROVISIONER = 'testbed.queen.local';
export const EXPANDABLE_CLASS = 'queen-expandable';
export const ONLINE_CLASS = 'queen-online';
export const LIMITED_CLASS = 'queen-limited';
export const FIXED_CLASS = 'queen-fixed';
const FINALIZER = 'external-provisioner.volume.kubernetes.io/finalizer';
const ATTACHER_FINALIZER = 'external-attacher/testbed-queen-local';
const RESIZE_PENDING_MESSAGE = 'Waiting for user to (re-)start a pod to finish file system resize of volume on node.';

const now = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');


export class Storage {
  #kube: Kube;
  #pvcs: Informer<KObject>;
  #pvs: Informer<KObject>;
  #classes = new Map<string, KObject>();
  #root: string;
  #log: (line: string) => void;
  #chains: Chains;
  /** Share (0..1) of volumes whose growth waits for a pod restart (FileSystemResizePending). */
  resizePendingShare = 0;
  /** The same, for the claims of one namespace (tests running side by side set their own). */
  resizePendingShareByNamespace = new Map<string, number>();
  /** The nodes say nothing when they cannot grow a mounted file system (no NodeResizeError), everywhere or in these namespaces. */
  nodeSilent = false;
  readonly nodeSilentNamespaces = new Set<string>();
  /** Namespaces whose volume growths fail at the resizer (retried until this is cleared). */
  readonly resizeFailing = new Set<string>();
  /** How long (simulated seconds) the node takes to expand a mounted volume of the online class. */
  onlineExpandSeconds = 2;
  onChange: (() => void) | undefined;
  /** The file system of a claim has a new size while pods may run on it. */
  onFileSystemResized: ((ns: string, claim: string, bytes: number) => void) | undefined;
  /** Whether a running pod mounts the claim (the node can expand it online). */
  isMounted: ((ns: string, claim: string) => boolean) | undefined;
  timeFactor = 1;
  /** The snapshots a claim may be made from (dataSource: a VolumeSnapshot). */
  snapshots: Snapshots | undefined;
  #vas: Informer<KObject> | undefined;
  #recorders: Record<'provisioner' | 'resizer' | 'kubelet', EventRecorder>;

  constructor(kube: Kube, pvcs: Informer<KObject>, pvs: Informer<KObject>, dir: string, log: (line: string) => void, vas?: Informer<KObject>) {
    this.#kube = kube;
    this.#pvcs = pvcs;
    this.#pvs = pvs;
    this.#vas = vas;
    this.#root = join(dir, 'volumes');
    this.#log = log;
    this.#chains = new Chains('storage', log, () => this.onChange?.());
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
        metadata: { name: ONLINE_CLASS },
        provisioner: PROVISIONER,
        parameters: { expansion: 'online' },
        reclaimPolicy: 'Delete',
        volumeBindingMode: 'Immediate',
        allowVolumeExpansion: true,
      },
      {
        apiVersion: 'storage.k8s.io/v1',
        kind: 'StorageClass',
        metadata: { name: LIMITED_CLASS },
        provisioner: PROVISIONER,
        parameters: { maxSize: '2Gi' },
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
      // Volumes are attached to a node (VolumeAttachments) before a pod there mounts them.
      spec: { attachRequired: true, podInfoOnMount: false, volumeLifecycleModes: ['Persistent'], fsGroupPolicy: 'None' },
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
    this.#vas?.on({
      add: (va) => this.#enqueue(`va/${va.metadata.name}`, () => this.#syncAttachment(va.metadata.name)),
      update: (va) => this.#enqueue(`va/${va.metadata.name}`, () => this.#syncAttachment(va.metadata.name)),
    });
    for (const va of this.#vas?.list() ?? []) this.#enqueue(`va/${va.metadata.name}`, () => this.#syncAttachment(va.metadata.name));
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
    // Like the real external-provisioner and external-attacher, claims still waiting for a volume
    // and attachments not yet attached (or detached) are looked at again from time to time: a
    // change missed, or a write refused, while the API server was down (killed and started again,
    // the chaos tests' fault) would otherwise leave a claim unbound, or a pod waiting for its
    // volume, for ever.
    setInterval(() => {
      for (const pvc of this.#pvcs.list()) {
        const key = `pvc/${pvc.metadata.uid}`;
        if (pvc.spec?.volumeName || pvc.metadata.deletionTimestamp || this.#chains.has(key)) continue;
        this.#enqueue(key, () => this.#syncClaim(pvc.metadata.namespace!, pvc.metadata.name));
      }
      for (const va of this.#vas?.list() ?? []) {
        const key = `va/${va.metadata.name}`;
        const pending = va.metadata.deletionTimestamp ? (va.metadata.finalizers ?? []).includes(ATTACHER_FINALIZER) : (va as any).status?.attached !== true;
        if ((va as any).spec?.attacher !== PROVISIONER || !pending || this.#chains.has(key)) continue;
        this.#enqueue(key, () => this.#syncAttachment(va.metadata.name));
      }
    }, Math.max(1000, 10_000 * this.timeFactor)).unref();
  }

  idle(): Promise<void> {
    return this.#chains.idle();
  }

  #enqueue(key: string, fn: () => Promise<void>): void {
    this.#chains.enqueue(key, fn);
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
    const source = pvc.spec?.dataSourceRef ?? pvc.spec?.dataSource;
    let copyOf: string | null = null;
    if (source?.kind === 'VolumeSnapshot' && source.apiGroup === 'snapshot.storage.k8s.io') {
      const from = await this.#snapshotSource(pvc, source.name);
      if ('failed' in from) {
        this.#event(pvc, 'Warning', 'ProvisioningFailed', `failed to provision volume with StorageClass "${sc.metadata.name}": ${from.failed}`, 'provisioner');
        return; // looked at again with the claims that wait for a volume
      }
      copyOf = from.folder;
    }
    if (copyOf && !(await this.#kube.getOrNull(`/api/v1/persistentvolumes/${pvName}`))) {
      rmSync(folder, { recursive: true, force: true });
      cpSync(copyOf, folder, { recursive: true, preserveTimestamps: true });
    }
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
      this.#log(`storage: provisioned ${pvName} for ${pvc.metadata.namespace}/${pvc.metadata.name} in ${folder}${copyOf ? ` from the snapshot ${source.name}` : ''}`);
      this.#event(pvc, 'Normal', 'ProvisioningSucceeded', `Successfully provisioned volume ${pvName}`, 'provisioner');
    } catch (e) {
      if (!isConflict(e)) throw e;
    }
  }

  /** The copy a claim made from a VolumeSnapshot starts from, or why it cannot be made yet (the external provisioner's words). */
  async #snapshotSource(pvc: KObject, name: string): Promise<{ folder: string } | { failed: string }> {
    const ns = pvc.metadata.namespace!;
    const which = `error getting handle for DataSource Type VolumeSnapshot by Name ${name}`;
    const vs = await this.#kube.getOrNull(`${SNAPSHOT_API}/namespaces/${ns}/volumesnapshots/${name}`);
    if (!vs) return { failed: `${which}: error getting snapshot ${name} from api server: volumesnapshots.snapshot.storage.k8s.io "${name}" not found` };
    if ((vs as any).status?.readyToUse !== true) return { failed: `${which}: snapshot ${name} is not Ready` };
    const contentName = (vs as any).status?.boundVolumeSnapshotContentName;
    const content = contentName ? await this.#kube.getOrNull(`${SNAPSHOT_API}/volumesnapshotcontents/${contentName}`) : null;
    const handle: string | undefined = (content as any)?.status?.snapshotHandle;
    if (!content || !handle) return { failed: `${which}: snapshot ${name} not bound` };
    const folder = this.snapshots?.snapshotFolder(handle);
    if (!folder) return { failed: `${which}: the snapshot ${handle} is not held by ${PROVISIONER}` };
    const restoreSize = Number((content as any).status?.restoreSize ?? 0);
    const requested = parseQuantity(pvc.spec?.resources?.requests?.storage ?? '0');
    if (requested < restoreSize) return { failed: `requested volume size ${requested} is less than the size ${restoreSize} for the source snapshot ${name}` };
    return { folder };
  }

  async #maybeResize(pvc: KObject): Promise<void> {
    const sc = await this.#storageClass(pvc.spec?.storageClassName);
    if (!sc || (sc as any).provisioner !== PROVISIONER || (sc as any).allowVolumeExpansion !== true) return;
    const wantStr: string | undefined = pvc.spec.resources?.requests?.storage;
    const haveStr: string | undefined = pvc.status?.capacity?.storage;
    if (!wantStr || !haveStr) return;
    const want = parseQuantity(wantStr);
    const path = `/api/v1/namespaces/${pvc.metadata.namespace}/persistentvolumeclaims/${pvc.metadata.name}/status`;
    const conditions: any[] = pvc.status?.conditions ?? [];
    const others = conditions.filter((c: any) => !['Resizing', 'FileSystemResizePending', 'ControllerResizeError'].includes(c.type));
    if (want <= parseQuantity(haveStr)) {
      // A request taken back after a failed growth (RecoverVolumeExpansionFailure): the failure goes.
      if (conditions.some((c: any) => c.type === 'ControllerResizeError') || pvc.status?.allocatedResourceStatuses?.storage === 'ControllerResizeInfeasible') {
        await this.#kube.mergePatch(path, {
          status: { allocatedResources: { storage: haveStr }, allocatedResourceStatuses: null, conditions: others.length ? others : null },
        });
      }
      return;
    }
    const allocated = pvc.status?.allocatedResources?.storage;
    const pending = conditions.some((c) => c.type === 'FileSystemResizePending');
    if (pending && allocated && parseQuantity(allocated) >= want) return; // waits for the kubelet
    const pvName: string = pvc.spec.volumeName;
    const pv = this.#pvs.get(pvName) ?? (await this.#kube.getOrNull(`/api/v1/persistentvolumes/${pvName}`));
    if (!pv || pv.metadata.annotations?.['pv.kubernetes.io/provisioned-by'] !== PROVISIONER) return;
    const ns = pvc.metadata.namespace!;
    const failed = async (status: 'ControllerResizeInfeasible' | 'ControllerResizeInProgress', error: string) => {
      const message = `resize volume "${pvName}" by resizer "${PROVISIONER}" failed: ${error}`;
      const prev = conditions.find((c: any) => c.type === 'ControllerResizeError');
      if (prev?.message !== message || pvc.status?.allocatedResourceStatuses?.storage !== status) {
        await this.#kube.mergePatch(path, {
          status: {
            allocatedResources: { storage: wantStr },
            allocatedResourceStatuses: { storage: status },
            conditions: [...others, { type: 'ControllerResizeError', status: 'True', lastProbeTime: null, lastTransitionTime: prev?.lastTransitionTime ?? now(), message }],
          },
        });
        this.#event(pvc, 'Warning', 'VolumeResizeFailed', message, 'resizer');
        this.#log(`storage: growing ${pvName} to ${wantStr} failed: ${error}`);
      }
    };
    // A class with a largest size: the API server accepted the request, the backend refuses it.
    const maxSize = (sc as any).parameters?.maxSize as string | undefined;
    if (maxSize && want > parseQuantity(maxSize)) {
      await failed('ControllerResizeInfeasible', `rpc error: code = OutOfRange desc = the requested size ${wantStr} exceeds the largest volume of class ${sc.metadata.name}, ${maxSize}`);
      return;
    }
    // A backend that fails for a while: the resizer tries again.
    if (this.resizeFailing.has(ns)) {
      await failed('ControllerResizeInProgress', 'rpc error: code = Unavailable desc = the storage backend did not answer (test bed)');
      setTimeout(() => this.#enqueue(`pvc/${pvc.metadata.uid}`, () => this.#syncClaim(ns, pvc.metadata.name)), Math.max(500, 5000 * this.timeFactor)).unref();
      return;
    }
    await this.#kube.mergePatch(path, {
      status: {
        allocatedResources: { storage: wantStr },
        allocatedResourceStatuses: { storage: 'ControllerResizeInProgress' },
      },
    });
    if (parseQuantity(pv.spec?.capacity?.storage) < want) {
      await this.#kube.mergePatch(`/api/v1/persistentvolumes/${pvName}`, { spec: { capacity: { storage: wantStr } } });
    }
    const online = (sc as any).parameters?.expansion === 'online';
    if (online || this.#resizeNeedsRestart(pvName, ns)) {
      await this.#kube.mergePatch(path, {
        status: {
          allocatedResourceStatuses: { storage: 'NodeResizePending' },
          conditions: [...others, { type: 'FileSystemResizePending', status: 'True', lastProbeTime: null, lastTransitionTime: now(), message: RESIZE_PENDING_MESSAGE }],
        },
      });
      this.#event(pvc, 'Normal', 'FileSystemResizeRequired', 'Require file system resize of volume on node', 'resizer');
      // A moment later the node, while a pod mounts the volume, expands its file system (the
      // online class), or tries to and says it cannot (NodeResizeError), unless it is silent.
      const claim = pvc.metadata.name;
      const silent = this.nodeSilent || this.nodeSilentNamespaces.has(ns);
      this.#log(`storage: ${pvName} grown to ${wantStr}; ${online ? 'the node expands its file system online' : 'file system resize pending until a pod starts'}`);
      const nodeStep = online ? () => this.finishNodeResize(ns, claim) : silent ? null : () => this.#failOnlineGrowth(ns, claim);
      if (nodeStep) {
        setTimeout(() => {
          if (this.isMounted?.(ns, claim)) this.#enqueue(`pvc/${pvc.metadata.uid}`, nodeStep);
        }, Math.max(100, this.onlineExpandSeconds * 1000 * this.timeFactor)).unref();
      }
    } else {
      await this.#kube.mergePatch(path, {
        status: { capacity: { storage: wantStr }, allocatedResourceStatuses: null, conditions: others.length ? others : null },
      });
      this.#event(pvc, 'Normal', 'VolumeResizeSuccessful', `resize volume "${pvName}" by resizer "${PROVISIONER}" finished successfully`, 'resizer');
      this.#log(`storage: ${pvName} grown to ${wantStr}`);
      this.onFileSystemResized?.(ns, pvc.metadata.name, want);
    }
  }

  /**
   * The node could not grow the file system of a mounted volume of the restart kind (what a
   * kubelet records when the driver refuses NodeExpandVolume while the volume is in use): a
   * NodeResizeError beside FileSystemResizePending, and a Warning; the pod's next start grows it.
   */
  async #failOnlineGrowth(ns: string, claimName: string): Promise<void> {
    const pvc = await this.#kube.getOrNull(`/api/v1/namespaces/${ns}/persistentvolumeclaims/${claimName}`);
    const conds: any[] = pvc?.status?.conditions ?? [];
    if (!pvc || !conds.some((c) => c.type === 'FileSystemResizePending') || conds.some((c) => c.type === 'NodeResizeError')) return;
    const error = `rpc error: code = FailedPrecondition desc = the file system of a mounted volume cannot grow; it grows when the volume is mounted again (test bed)`;
    await this.#kube.mergePatch(`/api/v1/namespaces/${ns}/persistentvolumeclaims/${claimName}/status`, {
      status: { conditions: [...conds, { type: 'NodeResizeError', status: 'True', lastProbeTime: null, lastTransitionTime: now(), message: `failed to expand pvc with ${error}` }] },
    });
    this.#event(pvc, 'Warning', 'FileSystemResizeFailed', `MountVolume.NodeExpandVolume failed for volume "${pvc.spec?.volumeName}" : ${error}`, 'kubelet');
    this.#log(`storage: the node could not grow the mounted file system of ${ns}/${claimName}`);
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
    const others = conds.filter((c) => !['FileSystemResizePending', 'Resizing', 'NodeResizeError'].includes(c.type));
    await this.#kube.mergePatch(`/api/v1/namespaces/${ns}/persistentvolumeclaims/${claimName}/status`, {
      status: { capacity: { storage: size }, allocatedResourceStatuses: null, conditions: others.length ? others : null },
    });
    this.#event(pvc, 'Normal', 'FileSystemResizeSuccessful', `MountVolume.NodeExpandVolume succeeded for volume "${pvc.spec.volumeName}"`, 'kubelet');
    this.#log(`storage: file system of ${ns}/${claimName} resized to ${size}`);
    this.onFileSystemResized?.(ns, claimName, parseQuantity(size));
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

  /**
   * The external attacher: a VolumeAttachment of our driver is attached at once (status.attached)
   * and detached when it is deleted (its finalizer removed). The attach/detach controller decides
   * when: it attaches a volume to the node of a pod that uses it, and detaches it once no pod there
   * uses it and the node's kubelet reports it unmounted.
   */
  async #syncAttachment(name: string): Promise<void> {
    const va = this.#vas?.get(name);
    if (!va || (va as any).spec?.attacher !== PROVISIONER) return;
    const fins: string[] = va.metadata.finalizers ?? [];
    if (va.metadata.deletionTimestamp) {
      const i = fins.indexOf(ATTACHER_FINALIZER);
      if (i < 0) return;
      try {
        await this.#kube.jsonPatch(`/apis/storage.k8s.io/v1/volumeattachments/${name}`, [
          { op: 'test', path: `/metadata/finalizers/${i}`, value: ATTACHER_FINALIZER },
          { op: 'remove', path: `/metadata/finalizers/${i}` },
        ]);
        this.#log(`storage: detached ${(va as any).spec?.source?.persistentVolumeName} from ${(va as any).spec?.nodeName}`);
      } catch (e) {
        if (isNotFound(e) || (e instanceof KubeError && e.status === 422)) return;
        throw e;
      }
      return;
    }
    if (!fins.includes(ATTACHER_FINALIZER)) {
      await this.#kube.mergePatch(`/apis/storage.k8s.io/v1/volumeattachments/${name}`, { metadata: { finalizers: [...fins, ATTACHER_FINALIZER] } });
    }
    if ((va as any).status?.attached !== true) {
      await this.#kube.mergePatch(`/apis/storage.k8s.io/v1/volumeattachments/${name}/status`, { status: { attached: true } });
      this.#log(`storage: attached ${(va as any).spec?.source?.persistentVolumeName} to ${(va as any).spec?.nodeName}`);
    }
  }

  /** The name a node reports an attachable volume of ours under (node.status.volumesAttached/InUse), or null. */
  attachName(pv: KObject): string | null {
    const csi = pv.spec?.csi;
    if (!this.#vas || csi?.driver !== PROVISIONER || !csi.volumeHandle) return null;
    return `kubernetes.io/csi/${PROVISIONER}^${csi.volumeHandle}`;
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
