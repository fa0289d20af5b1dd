// A container from an image folder, the way a container runtime starts one: the process gets a
// mount namespace of its own whose root holds exactly the image's files (read-only), the base
// image's userland (this machine's /usr, read-only: the stand-in for a distroless base), the
// pod's volumes (the only writable places), /etc with the pod's resolver (the cluster DNS, its
// search path and ndots:5) and hosts file, then it runs as the pod's user with the image's (or
// the pod's) command. No PID or network namespace: the process shares the machine's loopback
// network, where every pod has an address of its own (127.N.x.y). It has a UTS namespace: its
// host name is the pod's, as a pod's is.
//
// As root this is `unshare --mount`, a bind-mounted root and `chroot --userspec`. Without root it
// uses an unprivileged user namespace (`unshare --user --map-root-user`); the process then runs
// under the caller's uid, still on read-only files.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BuiltImage } from './image.ts';

export interface ContainerMount {
  /** Where the process sees it. */
  path: string;
  /** The folder (or file) on this machine. */
  host: string;
  readOnly: boolean;
}

export interface ContainerSpec {
  image: BuiltImage;
  /** The Node.js binary put where the base image keeps it. */
  nodeBinary: string;
  argv: string[];
  workdir: string;
  user: { uid: number; gid: number } | null;
  readOnlyRoot: boolean;
  mounts: ContainerMount[];
  hostname: string;
  podIp: string;
  /** host:port is not possible in resolv.conf: the DNS server must listen on port 53. */
  nameserver: string | null;
  searches: string[];
  /** An empty folder on this machine that becomes the root (a mount point inside the namespace only). */
  rootDir: string;
  /** Where the generated /etc files go. */
  etcDir: string;
}

const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** /etc of the container: users, hosts, the resolver. */
function writeEtc(spec: ContainerSpec): void {
  mkdirSync(spec.etcDir, { recursive: true });
  const uid = spec.user?.uid ?? 0;
  const gid = spec.user?.gid ?? 0;
  writeFileSync(join(spec.etcDir, 'passwd'), `root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n${uid !== 0 && uid !== 65532 ? `user:x:${uid}:${gid}::/:/sbin/nologin\n` : ''}`);
  writeFileSync(join(spec.etcDir, 'group'), `root:x:0:\nnonroot:x:65532:\n`);
  writeFileSync(join(spec.etcDir, 'hosts'), `127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n${spec.podIp}\t${spec.hostname}\n`);
  writeFileSync(join(spec.etcDir, 'hostname'), `${spec.hostname}\n`);
  writeFileSync(join(spec.etcDir, 'nsswitch.conf'), 'passwd: files\ngroup: files\nhosts: files dns\n');
  writeFileSync(
    join(spec.etcDir, 'resolv.conf'),
    spec.nameserver ? `search ${spec.searches.join(' ')}\nnameserver ${spec.nameserver}\noptions ndots:5\n` : '# the test bed has no cluster DNS on port 53 (it needs root)\n',
  );
}

/**
 * The command that starts the container: its root assembled inside a new mount namespace, then
 * the image's process exec'ed in it (the same pid: signals go straight to it).
 */
export function containerCommand(spec: ContainerSpec): { command: string; args: string[] } {
  writeEtc(spec);
  mkdirSync(spec.rootDir, { recursive: true });
  const R = q(spec.rootDir);
  const lines: string[] = ['set -eu', `echo ${q(spec.hostname)} > /proc/sys/kernel/hostname`, `mount -t tmpfs -o mode=0755 container-root ${R}`];
  const bind = (host: string, path: string, readOnly: boolean, file = false) => {
    const target = `${R}${q(path)}`;
    lines.push(file ? `mkdir -p "$(dirname ${target})"; touch ${target}` : `mkdir -p ${target}`);
    lines.push(`mount --bind ${q(host)} ${target}`);
    if (readOnly) lines.push(`mount -o remount,bind,ro ${target}`);
  };
  // The base image's userland: read-only.
  bind('/usr', '/usr', true);
  lines.push(`for l in bin sbin lib lib32 lib64 libx32; do if [ -L "/$l" ]; then ln -s "$(readlink "/$l")" ${R}/$l; elif [ -d "/$l" ]; then mkdir ${R}/$l; mount --bind "/$l" ${R}/$l; mount -o remount,bind,ro ${R}/$l; fi; done`);
  bind('/etc/ssl', '/etc/ssl', true);
  for (const f of ['passwd', 'group', 'hosts', 'hostname', 'nsswitch.conf', 'resolv.conf']) bind(join(spec.etcDir, f), `/etc/${f}`, true, true);
  lines.push(`mkdir -p ${R}/proc ${R}/dev ${R}/sys ${R}/home/nonroot`, `mount --rbind /proc ${R}/proc`, `mount --rbind /dev ${R}/dev`, `mount --rbind /sys ${R}/sys`);
  bind(spec.nodeBinary, spec.image.nodePath, true, true);
  // The image's own files.
  lines.push(`for d in ${q(spec.image.rootfs)}/*; do n=$(basename "$d"); mkdir -p ${R}/"$n"; mount --bind "$d" ${R}/"$n"; mount -o remount,bind,ro ${R}/"$n"; done`);
  // The pod's volumes.
  for (const m of spec.mounts) bind(m.host, m.path, m.readOnly);
  if (spec.readOnlyRoot) lines.push(`mount -o remount,ro ${R}`);
  const userspec = spec.user && process.getuid?.() === 0 ? `--userspec=${spec.user.uid}:${spec.user.gid} ` : '';
  lines.push(`exec "$(PATH=/usr/sbin:/sbin:/usr/bin:/bin command -v chroot)" ${userspec}${R} /usr/bin/env -C ${q(spec.workdir)} -- ${spec.argv.map(q).join(' ')}`);
  const script = lines.join('\n');
  const root = process.getuid?.() === 0;
  return {
    command: 'unshare',
    args: [...(root ? [] : ['--user', '--map-root-user']), '--mount', '--uts', '--propagation', 'private', '--', '/bin/sh', '-c', script],
  };
}
