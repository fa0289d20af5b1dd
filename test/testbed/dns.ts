// The cluster DNS of the test bed: answers A queries for cluster names the way CoreDNS's kubernetes
// plugin does, from the Services and EndpointSlices the real controllers write. UDP and TCP on one
// loopback port.
import { createSocket, type Socket } from 'node:dgram';
import { createServer, type Server } from 'node:net';
import type { Informer, KObject } from './kube.ts';

const TYPE_A = 1;
const RCODE_NOERROR = 0;
const RCODE_FORMERR = 1;
const RCODE_NXDOMAIN = 3;
const RCODE_REFUSED = 5;

export const CLUSTER_DOMAIN = 'cluster.local';

interface Question {
  name: string;
  type: number;
  klass: number;
  end: number; // offset after the question section
}

function parseQuestion(msg: Buffer): Question | null {
  if (msg.length < 12) return null;
  const qd = msg.readUInt16BE(4);
  if (qd !== 1) return null;
  let off = 12;
  const labels: string[] = [];
  for (;;) {
    if (off >= msg.length) return null;
    const len = msg[off]!;
    if (len === 0) {
      off++;
      break;
    }
    if (len & 0xc0) return null; // no compression in a question
    labels.push(msg.toString('latin1', off + 1, off + 1 + len));
    off += 1 + len;
  }
  if (off + 4 > msg.length) return null;
  return { name: labels.join('.').toLowerCase(), type: msg.readUInt16BE(off), klass: msg.readUInt16BE(off + 2), end: off + 4 };
}

function response(query: Buffer, q: Question | null, rcode: number, ips: string[], ttl: number): Buffer {
  const id = query.readUInt16BE(0);
  const qflags = query.length >= 4 ? query.readUInt16BE(2) : 0;
  const opcode = (qflags >> 11) & 0xf;
  const rd = (qflags >> 8) & 1;
  const header = Buffer.alloc(12);
  header.writeUInt16BE(id, 0);
  // QR=1, opcode, AA=1, RD copied, RA=0, rcode
  header.writeUInt16BE(0x8000 | (opcode << 11) | 0x0400 | (rd << 8) | rcode, 2);
  header.writeUInt16BE(q ? 1 : 0, 4);
  header.writeUInt16BE(ips.length, 6);
  header.writeUInt16BE(0, 8);
  header.writeUInt16BE(0, 10);
  const parts: Buffer[] = [header];
  if (q) parts.push(query.subarray(12, q.end));
  for (const ip of ips) {
    const rr = Buffer.alloc(16);
    rr.writeUInt16BE(0xc00c, 0); // pointer to the question's name
    rr.writeUInt16BE(TYPE_A, 2);
    rr.writeUInt16BE(1, 4);
    rr.writeUInt32BE(ttl, 6);
    rr.writeUInt16BE(4, 10);
    ip.split('.').forEach((o, i) => rr.writeUInt8(Number(o), 12 + i));
    parts.push(rr);
  }
  return Buffer.concat(parts);
}

export interface DnsAnswer {
  rcode: 'NOERROR' | 'NXDOMAIN' | 'REFUSED';
  ips: string[];
}

export class ClusterDns {
  #services: Informer<KObject>;
  #slices: Informer<KObject>;
  #udp?: Socket;
  #tcp?: Server;
  #ttl: number;
  port = 0;

  constructor(services: Informer<KObject>, slices: Informer<KObject>, ttlSeconds: number) {
    this.#services = services;
    this.#slices = slices;
    this.#ttl = ttlSeconds;
  }

  #slicesOf(ns: string, svc: string): KObject[] {
    return this.#slices.list().filter((s) => s.metadata.namespace === ns && s.metadata.labels?.['kubernetes.io/service-name'] === svc);
  }

  /** Ready IPv4 endpoints of a Service, optionally only those with the given hostname. */
  #endpoints(ns: string, svc: string, hostname?: string): string[] {
    const ips = new Set<string>();
    for (const slice of this.#slicesOf(ns, svc)) {
      if ((slice as any).addressType !== 'IPv4') continue;
      for (const ep of ((slice as any).endpoints ?? []) as any[]) {
        // EndpointConditions.ready: nil means ready. The EndpointSlice controller sets it true for
        // a pod that is Ready, or for any pod with an address when the Service has
        // publishNotReadyAddresses.
        if (ep.conditions?.ready === false) continue;
        if (hostname !== undefined && ep.hostname !== hostname) continue;
        for (const a of ep.addresses ?? []) ips.add(a);
      }
    }
    return [...ips].sort();
  }

  /** Resolves a name as CoreDNS would; exported for tests and the control API. */
  lookup(fqdn: string): DnsAnswer {
    const name = fqdn.toLowerCase().replace(/\.$/, '');
    const suffix = `.${CLUSTER_DOMAIN}`;
    if (!name.endsWith(suffix)) return { rcode: 'REFUSED', ips: [] };
    const labels = name.slice(0, -suffix.length).split('.');
    const kind = labels.at(-1);
    if (kind === 'pod' && labels.length === 3) {
      const [dashed, ns] = labels as [string, string];
      const octets = dashed.split('-');
      const ok = octets.length === 4 && octets.every((o) => /^\d{1,3}$/.test(o) && Number(o) < 256);
      // CoreDNS's default "pods insecure" mode: any well-formed address in any namespace.
      if (!ok || !ns) return { rcode: 'NXDOMAIN', ips: [] };
      return { rcode: 'NOERROR', ips: [octets.map(Number).join('.')] };
    }
    if (kind !== 'svc') return { rcode: 'NXDOMAIN', ips: [] };
    if (labels.length === 3) {
      const [svcName, ns] = labels as [string, string];
      const svc = this.#services.get(`${ns}/${svcName}`);
      if (!svc) return { rcode: 'NXDOMAIN', ips: [] };
      const clusterIP: string | undefined = svc.spec?.clusterIP;
      if (svc.spec?.type === 'ExternalName') return { rcode: 'NOERROR', ips: [] };
      if (clusterIP && clusterIP !== 'None') return { rcode: 'NOERROR', ips: [clusterIP] };
      return { rcode: 'NOERROR', ips: this.#endpoints(ns, svcName) };
    }
    if (labels.length === 4) {
      const [host, svcName, ns] = labels as [string, string, string];
      const svc = this.#services.get(`${ns}/${svcName}`);
      if (!svc || (svc.spec?.clusterIP && svc.spec.clusterIP !== 'None')) return { rcode: 'NXDOMAIN', ips: [] };
      const ips = this.#endpoints(ns, svcName, host);
      return ips.length ? { rcode: 'NOERROR', ips } : { rcode: 'NXDOMAIN', ips: [] };
    }
    return { rcode: 'NXDOMAIN', ips: [] };
  }

  #answer(msg: Buffer): Buffer | null {
    if (msg.length < 12) return null;
    const q = parseQuestion(msg);
    if (!q || q.klass !== 1) return response(msg, q, RCODE_FORMERR, [], this.#ttl);
    const a = this.lookup(q.name);
    if (a.rcode === 'REFUSED') return response(msg, q, RCODE_REFUSED, [], this.#ttl);
    if (a.rcode === 'NXDOMAIN') return response(msg, q, RCODE_NXDOMAIN, [], this.#ttl);
    // The name exists: A records for A queries, no data (NOERROR, empty) for AAAA and the rest.
    return response(msg, q, RCODE_NOERROR, q.type === TYPE_A ? a.ips : [], this.#ttl);
  }

  async start(host = '127.0.0.1', port = 0): Promise<number> {
    const udp = createSocket('udp4');
    this.#udp = udp;
    udp.on('message', (msg, rinfo) => {
      const out = this.#answer(msg);
      if (out) udp.send(out, rinfo.port, rinfo.address);
    });
    await new Promise<void>((resolve, reject) => {
      udp.once('error', reject);
      udp.bind(port, host, () => resolve());
    });
    this.port = udp.address().port;
    // TCP on the same port: two-byte length prefix per message.
    const tcp = createServer((sock) => {
      let buf = Buffer.alloc(0);
      sock.on('data', (d) => {
        buf = Buffer.concat([buf, d]);
        while (buf.length >= 2) {
          const len = buf.readUInt16BE(0);
          if (buf.length < 2 + len) break;
          const out = this.#answer(buf.subarray(2, 2 + len));
          buf = buf.subarray(2 + len);
          if (out) {
            const l = Buffer.alloc(2);
            l.writeUInt16BE(out.length);
            sock.write(Buffer.concat([l, out]));
          }
        }
      });
      sock.on('error', () => {});
    });
    this.#tcp = tcp;
    await new Promise<void>((resolve) => {
      // Best effort: if the TCP port is taken, UDP alone serves.
      tcp.once('error', () => resolve());
      tcp.listen(this.port, host, () => resolve());
    });
    return this.port;
  }

  async stop(): Promise<void> {
    await Promise.all([
      new Promise<void>((r) => (this.#udp ? this.#udp.close(() => r()) : r())),
      new Promise<void>((r) => (this.#tcp?.listening ? this.#tcp.close(() => r()) : r())),
    ]);
  }
}
