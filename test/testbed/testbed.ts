// The test bed: a real Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler), a real Temporal dev server with its Web UI, and simulated nodes (a kubelet
// stand-in, storage, cluster DNS) that run the Queen node simulator for pods. Everything listens on
// loopback, keeps its data under one folder and stops with stop().
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Server } from 'node:http';
import { KubeConfig } from '@kubernetes/client-node';
import { Agent, request } from 'undici';
import { startControlServer } from './control.ts';
import { restartable } from './restartable.ts';
import { PodNetwork } from './network.ts';
import { ClusterDns } from './dns.ts';
import { Informer, Kube, type KObject } from './kube.ts';
import { serviceAccountKubeconfig as makeSaKubeconfig, writeKubeconfig } from './kubeconfig.ts';
import { ImageStore } from './image.ts';
import { claimIpRange } from './ip-range.ts';
import { holdPidFile } from './pid-file.ts';
import { Kubelet } from './kubelet.ts';
import { startKubeletServer } from './kubelet-server.ts';
import { NODES, Nodes } from './nodes.ts';
import { isAlive, liveProcesses, startProcess, stopProcess, trackPidsIn, type Proc } from './procs.ts';
import { EXPANDABLE_CLASS, FIXED_CLASS, PROVISIONER, Storage } from './storage.ts';
import { FAILING_SNAPSHOT_CLASS, installSnapshotCrds, SNAPSHOT_API, SNAPSHOT_CLASS, Snapshots } from './snapshots.ts';
import { launchTemporal, type TemporalServer } from './temporal.ts';
import { freePorts, releasePorts } from './ports.ts';
import { ensureTools, type Tools } from './tools.ts';

export interface TestbedInfo {
  dir: string;
  pid: number;
  startedAt: string;
  startupMs: number;
  kubeconfigPath: string;
  apiServer: string;
  temporal: { address: string; namespace: 'default'; uiUrl: string; httpUrl: string };
  controlUrl: string;
  dns: string;
  /** The cluster DNS on port 53, as the resolv.conf of a pod run from an image names it (null without root). */
  podNameserver: string | null;
  /** Pods get addresses from this range. */
  podAddresses: string;
  timeFactor: number;
  tools: { k8sVersion: string; kubectl: string; kubernetesBin: string; etcdBin: string; temporalBin: string; helm: string };
  nodes: string[];
  storageClasses: { expandable: string; fixed: string; default: string };
  /** The VolumeSnapshotClasses of the test bed's driver: the default one, and one whose driver refuses every snapshot. */
  snapshotClasses: { default: string; failing: string };
  provisioner: string;
  simMain: string;
  /** The Queen containers run in broker fleets (one process per node) unless their namespace says otherwise. */
  simFleet: boolean;
  logs: string;
}

export interface Testbed {
  dir: string;
  kubeconfigPath: string;
  kubeConfig(): KubeConfig;
  /** A kubeconfig for an existing ServiceAccount (its own RBAC); returns the file's path. */
  serviceAccountKubeconfig(namespace: string, name: string): Promise<string>;
  temporal: TestbedInfo['temporal'];
  controlUrl: string;
  timeFactor: number;
  info: TestbedInfo;
  /** Process ids of everything the test bed runs (control plane, Temporal, containers). */
  processes(): number[];
  /** Stops everything; the temporary folder is removed unless keep (or the folder was given). */
  stop(opts?: { keep?: boolean }): Promise<void>;
}

export interface TestbedOptions {
  /** Folder for data, logs and kubeconfigs; default a new temporary folder (removed by stop()). */
  dir?: string;
  /** Multiplies the pods' sleeps, probe periods, grace periods and back-offs; default 1 (real). */
  timeFactor?: number;
  log?: (line: string) => void;
  /** Keep the folder after stop() even when it is a temporary one (also QUEEN_TESTBED_KEEP=1). */
  keep?: boolean;
  /** Stop on SIGINT/SIGTERM of this process, then exit (default true). */
  handleSignals?: boolean;
  /**
   * Run the Queen simulators in broker fleets, one process per test bed node, instead of one
   * process per pod (default: QUEEN_TESTBED_SIM_FLEET=1). A namespace's `QUEEN_SIM_FLEET` (control
   * API /sim/env) overrides it either way for its pods.
   */
  simFleet?: boolean;
}

const here = fileURLToPath(new URL('.', import.meta.url));
export const SIM_MAIN = join(here, '..', 'sim', 'main.ts');
const SERVICE_CIDR = '10.96.0.0/16';
const SA_ISSUER = 'https://kubernetes.default.svc.cluster.local';

async function httpOk(url: string, opts: { agent?: Agent } = {}): Promise<boolean> {
  try {
    const res = await request(url, {
      dispatcher: opts.agent,
      headersTimeout: 3000,
      bodyTimeout: 3000,
    });
    await res.body.text();
    return res.statusCode === 200;
  } catch {
    return false;
  }
}

function tail(path: string, lines = 15): string {
  try {
    return readFileSync(path, 'utf8').trim().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

/**
 * The API server's /readyz, verbose: ready or not, and when not, the checks that fail (a CI run
 * once saw it unready for 50 s on a loaded machine with nothing in its log to say why).
 */
function apiserverReadiness(server: string, token: string, agent: Agent): { check: () => Promise<boolean>; why: () => string } {
  let last = 'no answer yet';
  const check = async () => {
    try {
      const res = await request(`${server}/readyz?verbose`, { dispatcher: agent, headers: { authorization: `Bearer ${token}` }, headersTimeout: 5000, bodyTimeout: 5000 });
      const body = await res.body.text();
      if (res.statusCode === 200) return true;
      const failing = body.split('\n').filter((line) => line.startsWith('[-]'));
      last = `HTTP ${res.statusCode}: ${failing.length ? failing.join('; ') : body.trim().slice(0, 300)}`;
    } catch (err) {
      last = (err as Error).message;
    }
    return false;
  };
  return { check, why: () => `its last /readyz said: ${last}` };
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number, proc?: Proc, why?: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (proc?.exit) throw new Error(`${what} exited with code ${proc.exit.exitCode} while starting; the end of ${proc.logPath}:\n${tail(proc.logPath)}`);
    if (Date.now() > deadline) throw new Error(`${what} was not ready within ${timeoutMs / 1000} s${why ? `; ${why()}` : ''}${proc ? `; the end of ${proc.logPath}:\n${tail(proc.logPath)}` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// Started detached; if the owning process dies without stopping the test bed (SIGKILL), it kills
// every process group the test bed had (their ids are kept in <dir>/pids) and removes the folder
// when it was a temporary one.
const WATCHDOG = `
owner=$1; pidfile=$2; remove=$3
exec 3<> <(:)
while kill -0 "$owner" 2>/dev/null; do read -t 1 -u 3 || true; done
if [ -f "$pidfile" ]; then while read -r pid; do [ -n "$pid" ] && kill -9 -- "-$pid" 2>/dev/null; done < "$pidfile"; fi
if [ -n "$remove" ]; then sleep 1; rm -rf -- "$remove"; fi
`;

export async function startTestbed(opts: TestbedOptions = {}): Promise<Testbed> {
  const began = performance.now();
  const log = opts.log ?? (() => {});
  const timeFactor = opts.timeFactor ?? 1;
  const simFleet = opts.simFleet ?? ['1', 'true', 'yes', 'on'].includes((process.env.QUEEN_TESTBED_SIM_FLEET ?? '').trim().toLowerCase());
  if (!(timeFactor > 0)) throw new Error(`the time factor must be above 0 (got ${timeFactor})`);
  const tools: Tools = await ensureTools(log);
  const ownDir = !opts.dir;
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'queen-testbed-'));
  const keep = opts.keep ?? process.env.QUEEN_TESTBED_KEEP === '1';
  mkdirSync(dir, { recursive: true });
  // One test bed at a time on a folder: a second (`npm start` run again in another terminal) would
  // start another etcd and Temporal server on the first one's data.
  const releaseDir = holdFolder(dir);
  for (const d of ['pki', 'logs', 'kubeconfigs', 'etcd']) mkdirSync(join(dir, d), { recursive: true });
  const logs = join(dir, 'logs');

  const procs: Proc[] = [];
  const cleanups: Array<() => Promise<void> | void> = [];
  let watchdog: ChildProcess | undefined;
  const untrack = trackPidsIn(join(dir, 'pids'));
  let stopping: Promise<void> | undefined;

  let ending = false;
  const stopAll = async (keepDir = keep) => {
    ending = true;
    for (const c of cleanups.reverse()) {
      try {
        await c();
      } catch (e) {
        log(`stop: ${(e as Error).message}`);
      }
    }
    // Nothing here is worth a long graceful shutdown (the data is thrown away, or kept only for a
    // look): SIGTERM to everything at once, SIGKILL to what still runs 3 s later.
    await Promise.all(procs.map((p) => stopProcess(p, 3000)));
    untrack();
    if (watchdog?.pid) {
      try {
        process.kill(watchdog.pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    releaseDir();
    if (ownDir && !keepDir) rmSync(dir, { recursive: true, force: true });
  };

  try {
    watchdog = spawn('bash', ['-c', WATCHDOG, 'queen-testbed-watchdog', String(process.pid), join(dir, 'pids'), ownDir && !keep ? dir : ''], {
      detached: true,
      stdio: 'ignore',
    });
    watchdog.unref();

    const controlPlanePorts = await freePorts(5, `test bed ${dir}`);
    cleanups.push(() => releasePorts(controlPlanePorts));
    const [etcdPort, etcdPeerPort, apiPort, kcmPort, schedPort] = controlPlanePorts as [number, number, number, number, number];

    // Credentials: static tokens for the control plane's own clients, a key for ServiceAccount tokens.
    const token = () => randomBytes(24).toString('hex');
    const tokens = { admin: token(), kcm: token(), scheduler: token(), standIns: token() };
    const tokenFile = join(dir, 'pki', 'tokens.csv');
    writeFileSync(
      tokenFile,
      [
        `${tokens.admin},testbed-admin,testbed-admin,"system:masters"`,
        `${tokens.kcm},system:kube-controller-manager,system:kube-controller-manager`,
        `${tokens.scheduler},system:kube-scheduler,system:kube-scheduler`,
        `${tokens.standIns},testbed:stand-ins,testbed-stand-ins,"system:masters"`,
      ].join('\n') + '\n',
      { mode: 0o600 },
    );
    const saKey = join(dir, 'pki', 'sa.key');
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    writeFileSync(saKey, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });

    // etcd and Temporal first (Temporal takes longest and needs nothing else).
    const etcd = startProcess('etcd', tools.etcd, [
      '--name=testbed',
      `--data-dir=${join(dir, 'etcd')}`,
      `--listen-client-urls=http://127.0.0.1:${etcdPort}`,
      `--advertise-client-urls=http://127.0.0.1:${etcdPort}`,
      `--listen-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
      `--initial-cluster=testbed=http://127.0.0.1:${etcdPeerPort}`,
      '--unsafe-no-fsync=true',
      '--log-level=warn',
    ], { logPath: join(logs, 'etcd.log'), cwd: dir, owner: dir });
    procs.push(etcd);
    const temporal: TemporalServer = await launchTemporal({ dir: join(dir, 'temporal'), temporalBin: tools.temporal, owner: dir });
    procs.push(temporal.proc);
    cleanups.push(() => releasePorts(Object.values(temporal.ports)));
    let temporalReady = temporal.ready;
    await waitFor('etcd', () => httpOk(`http://127.0.0.1:${etcdPort}/health`), 30_000, etcd);

    const certDir = join(dir, 'pki', 'apiserver');
    const apiserverArgs = [
      `--etcd-servers=http://127.0.0.1:${etcdPort}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      `--secure-port=${apiPort}`,
      `--cert-dir=${certDir}`,
      `--token-auth-file=${tokenFile}`,
      '--authorization-mode=RBAC',
      '--anonymous-auth=false',
      `--service-account-issuer=${SA_ISSUER}`,
      `--service-account-key-file=${saKey}`,
      `--service-account-signing-key-file=${saKey}`,
      `--api-audiences=${SA_ISSUER}`,
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      // The default plugins (which include PersistentVolumeClaimResize, DefaultStorageClass,
      // StorageObjectInUseProtection, ServiceAccount, NamespaceLifecycle), named to be sure.
      '--enable-admission-plugins=NamespaceLifecycle,ServiceAccount,DefaultStorageClass,StorageObjectInUseProtection,PersistentVolumeClaimResize,DefaultTolerationSeconds,TaintNodesByCondition,Priority,ResourceQuota',
      '--allow-privileged=true',
      '--profiling=false',
      '--event-ttl=2h',
      '--kubelet-preferred-address-types=InternalIP',
    ];
    const launchApiserver = () => {
      const p = startProcess('kube-apiserver', tools.kubeApiserver, apiserverArgs, { logPath: join(logs, 'kube-apiserver.log'), cwd: dir, owner: dir });
      procs.push(p);
      return p;
    };
    const apiserver = launchApiserver();
    // The API server writes its self-signed certificate, then its key, into the cert dir, neither
    // atomically: a certificate read as soon as its file exists can be empty or cut short, and a
    // client that trusts it never connects (a CI run saw the API server up, and /readyz never
    // answered for 50 s). Read it once its key is there too, and only whole.
    const caPath = join(certDir, 'apiserver.crt');
    let ca = '';
    await waitFor(
      'kube-apiserver (certificate)',
      async () => {
        if (!existsSync(join(certDir, 'apiserver.key'))) return false;
        ca = readFileSync(caPath, 'utf8');
        const begins = ca.split('-----BEGIN CERTIFICATE-----').length - 1;
        return begins > 0 && begins === ca.split('-----END CERTIFICATE-----').length - 1;
      },
      30_000,
      apiserver,
    );
    const server = `https://127.0.0.1:${apiPort}`;
    const apiAgent = new Agent({ connect: { ca } });
    cleanups.push(() => apiAgent.close());
    const insecure = new Agent({ connect: { rejectUnauthorized: false } });
    cleanups.push(() => insecure.close());
    // 120 s, where it takes 5 to 10 s alone: room for a machine whose two cores other test beds
    // share (the wait ends as soon as it is ready).
    const apiserverReady = apiserverReadiness(server, tokens.admin, apiAgent);
    await waitFor('kube-apiserver', apiserverReady.check, 120_000, apiserver, apiserverReady.why);
    // The API server and the Temporal server can be killed and started again (control API /processes).
    const restartables = [
      restartable('kube-apiserver', apiserver, async () => launchApiserver(), (p) =>
        waitFor('kube-apiserver (started again)', apiserverReady.check, 120_000, p, apiserverReady.why),
      ),
      restartable(
        'temporal',
        temporal.proc,
        async () => {
          const again = await launchTemporal({ dir: join(dir, 'temporal'), temporalBin: tools.temporal, owner: dir, ports: temporal.ports });
          procs.push(again.proc);
          again.ready.catch(() => undefined);
          temporalReady = again.ready;
          return again.proc;
        },
        () => temporalReady,
      ),
    ];

    const kubeconfigPath = writeKubeconfig(join(dir, 'kubeconfig'), { server, caPem: ca, token: tokens.admin, user: 'testbed-admin' });
    const kcmConfig = writeKubeconfig(join(dir, 'kubeconfigs', 'kube-controller-manager.yaml'), { server, caPem: ca, token: tokens.kcm, user: 'system:kube-controller-manager' });
    const schedConfig = writeKubeconfig(join(dir, 'kubeconfigs', 'kube-scheduler.yaml'), { server, caPem: ca, token: tokens.scheduler, user: 'system:kube-scheduler' });

    // The controller manager and the scheduler run as a machine's service manager (or a kubelet's
    // static pods) runs them: one that exits is started again a second later (the chaos soak saw the
    // scheduler exit after an API server restart, "scheduler cache is corrupted", and no pod was
    // scheduled again). The API server and Temporal are the control API's to kill and start.
    const supervised = (name: string, command: string, args: string[], logPath: string): Proc => {
      const launch = (): Proc => {
        const p = startProcess(name, command, args, { logPath, cwd: dir, owner: dir });
        procs.push(p);
        void p.exited.then((exit) => {
          if (ending) return;
          log(`${name} exited (code ${exit.exitCode}); starting it again`);
          setTimeout(() => {
            if (!ending) launch();
          }, 1000).unref();
        });
        return p;
      };
      return launch();
    };
    const kcm = supervised('kube-controller-manager', tools.kubeControllerManager, [
      `--kubeconfig=${kcmConfig}`,
      `--authentication-kubeconfig=${kcmConfig}`,
      `--authorization-kubeconfig=${kcmConfig}`,
      '--bind-address=127.0.0.1',
      `--secure-port=${kcmPort}`,
      `--cert-dir=${join(dir, 'pki', 'kube-controller-manager')}`,
      '--leader-elect=false',
      '--use-service-account-credentials=true',
      `--service-account-private-key-file=${saKey}`,
      `--root-ca-file=${caPath}`,
      '--cluster-name=queen-testbed',
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      '--controllers=*',
      '--profiling=false',
    ], join(logs, 'kube-controller-manager.log'));
    // The VolumeSnapshot API, from the external-snapshotter's definitions, and its real controller.
    await installSnapshotCrds(new Kube({ server, token: tokens.admin, ca }), tools.snapshotCrds);
    const snapConfig = writeKubeconfig(join(dir, 'kubeconfigs', 'snapshot-controller.yaml'), { server, caPem: ca, token: tokens.standIns, user: 'testbed:stand-ins' });
    supervised('snapshot-controller', tools.snapshotController, [
      `--kubeconfig=${snapConfig}`,
      '--leader-election=false',
      '--worker-threads=4',
    ], join(logs, 'snapshot-controller.log'));
    const scheduler = supervised('kube-scheduler', tools.kubeScheduler, [
      `--kubeconfig=${schedConfig}`,
      `--authentication-kubeconfig=${schedConfig}`,
      `--authorization-kubeconfig=${schedConfig}`,
      '--bind-address=127.0.0.1',
      `--secure-port=${schedPort}`,
      `--cert-dir=${join(dir, 'pki', 'kube-scheduler')}`,
      '--leader-elect=false',
      '--profiling=false',
    ], join(logs, 'kube-scheduler.log'));

    // The stand-ins: nodes, storage, DNS, kubelet, and the control API.
    const standInLog = join(logs, 'stand-ins.log');
    const logLine = (line: string) => {
      try {
        writeFileSync(standInLog, `${new Date().toISOString()} ${line}\n`, { flag: 'a' });
      } catch {
        // stopping
      }
    };
    const kube = new Kube({ server, token: tokens.standIns, ca });
    cleanups.push(() => kube.close());
    const informer = (path: string) => {
      const inf = new Informer<KObject>(kube, path, { log: logLine });
      cleanups.push(() => inf.stop());
      return inf;
    };
    const pods = informer('/api/v1/pods');
    const services = informer('/api/v1/services');
    const slices = informer('/apis/discovery.k8s.io/v1/endpointslices');
    const pvcs = informer('/api/v1/persistentvolumeclaims');
    const pvs = informer('/api/v1/persistentvolumes');
    const vas = informer('/apis/storage.k8s.io/v1/volumeattachments');
    const nodeObjects = informer('/api/v1/nodes');
    const namespaces = informer('/api/v1/namespaces');
    const policies = informer('/apis/networking.k8s.io/v1/networkpolicies');
    const snapshotContents = informer(`${SNAPSHOT_API}/volumesnapshotcontents`);
    // The kubelet API (for kubectl logs) on every node address, with the API server's own
    // certificate (the API server does not verify kubelets it has no CA for).
    let kubeletRef: Kubelet | undefined;
    const kubeletServer = await startKubeletServer({
      nodeIps: NODES.map((n) => n.ip),
      cert: ca,
      key: readFileSync(join(certDir, 'apiserver.key'), 'utf8'),
      lookup: (ns, pod, container) => kubeletRef?.logOf(ns, pod, container),
    });
    cleanups.push(() => kubeletServer.stop());
    const nodes = new Nodes(kube, tools.k8sVersion, logLine, kubeletServer.port);
    cleanups.push(() => nodes.stop());
    const storage = new Storage(kube, pvcs, pvs, dir, logLine, vas);
    storage.timeFactor = timeFactor;
    const snapshots = new Snapshots(kube, snapshotContents, pvs, dir, logLine);
    snapshots.timeFactor = timeFactor;
    storage.snapshots = snapshots;
    const dns = new ClusterDns(services, slices, Math.max(1, Math.round(5 * timeFactor)));
    await Promise.all([
      nodes.install(),
      storage.install(),
      snapshots.install(PROVISIONER),
      snapshotContents.start(),
      services.start(),
      slices.start(),
      pvcs.start(),
      pvs.start(),
      vas.start(),
      nodeObjects.start(),
      namespaces.start(),
      policies.start(),
    ]);
    const dnsPort = await dns.start('127.0.0.1');
    cleanups.push(() => dns.stop());
    const dnsAddress = `127.0.0.1:${dnsPort}`;
    const ipRangeEarly = claimIpRange(dir);
    const ipRange = ipRangeEarly;
    cleanups.push(() => ipRange.release());
    // The pods' resolver: the same cluster DNS on port 53 of an address of the test bed's range, as
    // a resolv.conf needs (it takes no port). Binding port 53 needs root; without it, containers
    // run from an image have no cluster DNS (the simulators are told the port above).
    const podDns = new ClusterDns(services, slices, Math.max(1, Math.round(5 * timeFactor)));
    const podNameserver = `127.${ipRange.octet}.0.10`;
    let podNameserverUp: string | null = null;
    try {
      await podDns.start(podNameserver, 53);
      podNameserverUp = podNameserver;
      cleanups.push(() => podDns.stop());
    } catch (e) {
      log(`no cluster DNS on ${podNameserver}:53 for the pods run from an image: ${(e as Error).message}`);
    }
    // The operator's image, built from the Dockerfile (cached): pulled ahead, as a node would.
    const images = new ImageStore(log);
    void images.prepare().catch((e) => log(`building the operator image failed: ${(e as Error).message}`));
    const network = new PodNetwork({ pods, policies, namespaces, nodes, log: logLine });
    const kubelet = new Kubelet({
      kube,
      pods,
      services,
      storage,
      nodes,
      network,
      nodeObjects,
      dir,
      timeFactor,
      dnsAddress,
      simMain: SIM_MAIN,
      simFleet,
      ipOctet: ipRange.octet,
      images,
      podNameserver: podNameserverUp,
      apiServer: { host: '127.0.0.1', port: apiPort },
      log: logLine,
    });
    kubeletRef = kubelet;
    cleanups.push(() => kubelet.stop());
    storage.onChange = () => kubelet.kick();
    storage.onFileSystemResized = (ns, claim, bytes) => kubelet.fileSystemResized(ns, claim, bytes);
    storage.isMounted = (ns, claim) => kubelet.isMounted(ns, claim);
    storage.start();
    snapshots.hooks.freezeClaim = (ns, claim) => kubelet.freezeClaim(ns, claim);
    snapshots.start(PROVISIONER);
    await pods.start();
    kubelet.start();

    let info!: TestbedInfo;
    const control = await startControlServer({ kubelet, storage, nodes, dns, network, processes: restartables, info: () => info });
    cleanups.push(() => new Promise<void>((r) => (control.server as Server).close(() => r())));
    (control.server as Server).unref();

    await Promise.all([
      // (Their serving certificates are self-signed: only their health is asked, without checking.)
      waitFor('kube-controller-manager', () => httpOk(`https://127.0.0.1:${kcmPort}/healthz`, { agent: insecure }), 60_000, kcm),
      waitFor('kube-scheduler', () => httpOk(`https://127.0.0.1:${schedPort}/healthz`, { agent: insecure }), 60_000, scheduler),
      // The ServiceAccount controller runs once the default namespace has its ServiceAccount.
      waitFor('the ServiceAccount controller', async () => !!(await kube.getOrNull('/api/v1/namespaces/default/serviceaccounts/default')), 60_000, kcm),
      temporal.ready,
    ]);

    const startupMs = Math.round(performance.now() - began);
    info = {
      dir,
      pid: process.pid,
      startedAt: new Date().toISOString(),
      startupMs,
      kubeconfigPath,
      apiServer: server,
      temporal: { address: temporal.address, namespace: 'default', uiUrl: temporal.uiUrl, httpUrl: temporal.httpUrl },
      controlUrl: control.url,
      dns: dnsAddress,
      podNameserver: podNameserverUp,
      podAddresses: `127.${ipRange.octet}.0.0/16`,
      timeFactor,
      tools: { k8sVersion: tools.k8sVersion, kubectl: tools.kubectl, kubernetesBin: tools.kubernetesBin, etcdBin: tools.etcdBin, temporalBin: tools.temporalBin, helm: tools.helm },
      nodes: nodes.names,
      storageClasses: { expandable: EXPANDABLE_CLASS, fixed: FIXED_CLASS, default: EXPANDABLE_CLASS },
      snapshotClasses: { default: SNAPSHOT_CLASS, failing: FAILING_SNAPSHOT_CLASS },
      provisioner: PROVISIONER,
      simMain: SIM_MAIN,
      simFleet,
      logs,
    };
    writeFileSync(join(dir, 'testbed.json'), JSON.stringify(info, null, 2) + '\n');
    log(`test bed up in ${(startupMs / 1000).toFixed(1)} s: ${dir}`);

    const signals: Array<[NodeJS.Signals, () => void]> = [];
    const tb: Testbed = {
      dir,
      kubeconfigPath,
      kubeConfig() {
        const kc = new KubeConfig();
        kc.loadFromFile(kubeconfigPath);
        return kc;
      },
      serviceAccountKubeconfig: (namespace, name) => makeSaKubeconfig(kubeconfigPath, dir, namespace, name),
      temporal: info.temporal,
      controlUrl: info.controlUrl,
      timeFactor,
      info,
      processes() {
        return liveProcesses()
          .filter((p) => p.owner === dir && !p.exit)
          .map((p) => p.pid)
          .filter((pid) => isAlive(pid));
      },
      stop(stopOpts = {}) {
        if (!stopping) {
          for (const [sig, fn] of signals) process.off(sig, fn);
          stopping = stopAll(stopOpts.keep ?? keep).then(() => log('test bed stopped'));
        }
        return stopping;
      },
    };
    if (opts.handleSignals !== false) {
      for (const sig of ['SIGINT', 'SIGTERM'] as const) {
        const fn = () => {
          void tb.stop().finally(() => process.exit(sig === 'SIGINT' ? 130 : 143));
        };
        signals.push([sig, fn]);
        process.once(sig, fn);
      }
    }
    return tb;
  } catch (e) {
    await stopAll().catch(() => {});
    throw e;
  }
}

/**
 * Takes a test bed's folder for this process, or says which live process runs a test bed on it
 * (and how to reach that one). A folder whose owner is gone (a test bed ended abruptly) is taken
 * over: starting again on it is how `npm start` resumes. Returns the release.
 */
function holdFolder(dir: string): () => void {
  const hold = holdPidFile(join(dir, 'owner.pid'));
  if ('release' in hold) return hold.release;
  const owner = hold.heldBy;
  throw new Error(
    `a test bed already runs in ${dir} (process ${owner}${owner === process.pid ? ', this one' : ''}): stop it first (Ctrl-C in its terminal, or kill ${owner}), ` +
      `or use it: export KUBECONFIG=${join(dir, 'kubeconfig')}`,
  );
}
