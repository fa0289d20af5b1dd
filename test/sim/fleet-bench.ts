// What simulated nodes at rest cost this machine: N three-node clusters formed, then measured for a
// while, either in one broker fleet (fleet.ts) or as one process per node (main.ts). Each node gets
// what the test bed gives it: a network file and a volume file it re-reads, a volume size (the disk
// gate), peers by FQDN through a DNS server, a raft token, real timings (time factor 1), and
// readiness/liveness probes (GET /health, every 5 s by default).
//
//   node test/sim/fleet-bench.ts [--clusters 50] [--mode fleet|process] [--seconds 60] [--probe-ms 5000] [--cpu-prof DIR] [KEY=VALUE ...]
//
// KEY=VALUE are simulator settings for every node (e.g. QUEEN_RAFT_HEARTBEAT_MS=500
// QUEEN_RAFT_ELECTION_MS=3000). Prints the formation time, the CPU used at rest (share of one core,
// from /proc) and the memory (RSS, and PSS, which shares the pages processes have in common).
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { FLEET_MAIN, SimFleet, type FleetNode } from './fleet-client.ts';
import { MiniDns, node24, SIM_MAIN, sleep } from './harness.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    clusters: { type: 'string', default: '50' },
    mode: { type: 'string', default: 'fleet' },
    seconds: { type: 'string', default: '60' },
    'probe-ms': { type: 'string', default: '5000' },
    'cpu-prof': { type: 'string' },
  },
});
const CLUSTERS = Number(values.clusters);
const MODE = values.mode === 'process' ? 'process' : 'fleet';
const SECONDS = Number(values.seconds);
const PROBE_MS = Number(values['probe-ms']);
const extra: Record<string, string> = {};
for (const p of positionals) {
  const i = p.indexOf('=');
  if (i > 0) extra[p.slice(0, i)] = p.slice(i + 1);
}

const TICK = 100; // /proc clock ticks per second (USER_HZ)
function procCpu(pid: number): { user: number; sys: number } {
  try {
    const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
    return { user: Number(rest[11]) / TICK, sys: Number(rest[12]) / TICK }; // utime, stime
  } catch {
    return { user: 0, sys: 0 };
  }
}
const cpuOf = (ps: number[]) => ps.map(procCpu).reduce((a, b) => ({ user: a.user + b.user, sys: a.sys + b.sys }), { user: 0, sys: 0 });
function procMem(pid: number): { rss: number; pss: number } {
  try {
    const t = fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
    const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(t)?.[1] ?? 0) * 1024;
    return { rss: kb('Rss'), pss: kb('Pss') };
  } catch {
    return { rss: 0, pss: 0 };
  }
}

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'queen-fleet-bench-'));
const dns = new MiniDns();
dns.ttl = 5; // the test bed's at time factor 1
await dns.start('127.0.0.1', 15353 + Math.floor(Math.random() * 1000));
const token = 'bench-token';
const children: ChildProcess[] = [];
let fleet: SimFleet | null = null;
const nodes: FleetNode[] = [];
const pids: number[] = [];
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
  fleet?.kill();
  fs.rmSync(root, { recursive: true, force: true });
});
process.on('SIGINT', () => process.exit(130));

if (MODE === 'fleet') {
  fleet = new SimFleet((env) => {
    const prof = values['cpu-prof'] ? ['--cpu-prof', `--cpu-prof-dir=${values['cpu-prof']}`] : [];
    const child = spawn(node24(), [...prof, FLEET_MAIN], { env: { PATH: process.env.PATH, HOME: os.homedir(), QUEEN_SIM_EXIT_WITH_PARENT: String(process.pid), ...env }, stdio: ['ignore', 'inherit', 'inherit'] });
    children.push(child);
    return { pid: child.pid!, kill: () => child.kill('SIGKILL'), exited: new Promise((r) => child.on('exit', r)) };
  });
  await fleet.ready;
  pids.push(fleet.pid);
}

const ipOf = (c: number, i: number) => `127.${60 + Math.floor(c / 250)}.${c % 250}.${i}`;
const host = (c: number, i: number) => `queen-${i - 1}.queen-headless.bench-${c}.svc.cluster.local`;
const began = Date.now();
for (let c = 0; c < CLUSTERS; c++) {
  const peers = [1, 2, 3].map((i) => `${i}=${host(c, i)}:7400/${host(c, i)}:6632`).join(',');
  for (let i = 1; i <= 3; i++) {
    dns.set(host(c, i), ipOf(c, i));
    const dir = path.join(root, `c${c}-n${i}`);
    fs.mkdirSync(path.join(dir, 'data'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'net.json'), '{}');
    fs.writeFileSync(path.join(dir, 'volume.json'), JSON.stringify({ bytes: 1 << 30 }));
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: dir,
      HOSTNAME: `queen-${i - 1}`,
      QUEEN_RAFT_NODE_ID: 'ordinal',
      QUEEN_RAFT_PEERS: peers,
      QUEEN_RAFT_DIR: '/var/lib/queen/raft',
      QUEEN_RAFT_TOKEN: token,
      QUEEN_SIM_MOUNTS: JSON.stringify({ '/var/lib/queen/raft': path.join(dir, 'data') }),
      QUEEN_SIM_IP: ipOf(c, i),
      QUEEN_SIM_DNS: dns.address,
      QUEEN_SIM_IMAGE: 'ghcr.io/queen-mq/queen:2.6.0',
      QUEEN_SIM_TIME_FACTOR: '1',
      QUEEN_SIM_NET_FILE: path.join(dir, 'net.json'),
      QUEEN_SIM_VOLUME_FILE: path.join(dir, 'volume.json'),
      QUEEN_SIM_VOLUME_BYTES: String(1 << 30),
      QUEEN_SIM_EXIT_WITH_PARENT: String(process.pid),
      ...extra,
    };
    if (fleet) {
      nodes.push(fleet.start(env, { log: path.join(dir, 'log') }));
    } else {
      const fd = fs.openSync(path.join(dir, 'log'), 'a');
      const child = spawn(node24(), [SIM_MAIN], { env, stdio: ['ignore', fd, fd] });
      fs.closeSync(fd);
      children.push(child);
      pids.push(child.pid!);
    }
  }
}

async function health(ip: string): Promise<number> {
  try {
    const r = await fetch(`http://${ip}:6632/health`, { signal: AbortSignal.timeout(5000) });
    await r.arrayBuffer();
    return r.status;
  } catch {
    return 0;
  }
}
const all = Array.from({ length: CLUSTERS }, (_, c) => [1, 2, 3].map((i) => ipOf(c, i))).flat();
for (;;) {
  const codes = await Promise.all(all.map(health));
  const ok = codes.filter((s) => s === 200).length;
  if (ok === all.length) break;
  if (Date.now() - began > 600_000) {
    console.log(`only ${ok} of ${all.length} nodes healthy after 10 minutes`);
    process.exit(1);
  }
  await sleep(1000);
}
const formedMs = Date.now() - began;

// Probes, as a kubelet's, spread over the period.
let probing = true;
const probes = (async () => {
  if (!(PROBE_MS > 0)) return;
  let k = 0;
  while (probing) {
    void health(all[k % all.length]!);
    k++;
    await sleep(PROBE_MS / all.length);
  }
})();

await sleep(10_000); // settle
const cpu0 = cpuOf(pids);
const t0 = Date.now();
await sleep(SECONDS * 1000);
const cpu1 = cpuOf(pids);
const secs = (Date.now() - t0) / 1000;
const share = (cpu1.user + cpu1.sys - cpu0.user - cpu0.sys) / secs;
const sysShare = (cpu1.sys - cpu0.sys) / secs;
const mem = pids.map(procMem).reduce((a, b) => ({ rss: a.rss + b.rss, pss: a.pss + b.pss }), { rss: 0, pss: 0 });
probing = false;
await probes;
const mb = (b: number) => (b / 1024 / 1024).toFixed(0);
const n = all.length;
console.log(
  `${MODE}: ${CLUSTERS} clusters (${n} nodes) formed in ${(formedMs / 1000).toFixed(1)} s; at rest over ${SECONDS} s: CPU ${(share * 100).toFixed(1)}% of a core (${(sysShare * 100).toFixed(1)}% in the kernel) ` +
    `(${((share * 1000) / n).toFixed(2)} ms/s per node), RSS ${mb(mem.rss)} MB, PSS ${mb(mem.pss)} MB (${(mem.pss / n / 1024 / 1024).toFixed(1)} MB per node)` +
    `${Object.keys(extra).length ? `; ${Object.entries(extra).map(([k, v]) => `${k}=${v}`).join(' ')}` : ''}; probes every ${PROBE_MS} ms per node`,
);
dns.close();
if (fleet && values['cpu-prof']) {
  // The fleet writes its profile as it exits, which it does once its control channel closes.
  fleet.close();
  await fleet.proc!.exited;
}
process.exit(0);
