// A container's environment, resolved as the kubelet resolves it (pkg/kubelet/kubelet_pods.go
// makeEnvironmentVariables): envFrom first, then env in order with $(VAR) expansion against the
// variables declared so far and the service variables, then the remaining service variables.
import type { KObject } from './kube.ts';
import { parseQuantity } from './kube.ts';

/** A failure the kubelet reports as CreateContainerConfigError, with its message. */
export class ContainerConfigError extends Error {}

export interface EnvSources {
  /** The object, or null when it does not exist. */
  secret(namespace: string, name: string): Promise<KObject | null>;
  configMap(namespace: string, name: string): Promise<KObject | null>;
  /** Service link variables (docker-link style) for the pod's namespace, plus the kubernetes Service's. */
  serviceEnv: Record<string, string>;
  podIP: string;
  hostIP: string;
  /** Node allocatable, for resourceFieldRef of a limit the container does not set. */
  nodeAllocatable: Record<string, string>;
}

/**
 * $(VAR) expansion as in k8s.io/kubernetes third_party/forked/golang/expansion: $(NAME) becomes the
 * value when NAME is defined and stays as written otherwise; $$ escapes a $.
 */
export function expand(input: string, lookup: (name: string) => string | undefined): string {
  let out = '';
  let i = 0;
  while (i < input.length) {
    const c = input[i]!;
    if (c !== '$' || i + 1 >= input.length) {
      out += c;
      i++;
      continue;
    }
    const next = input[i + 1]!;
    if (next === '$') {
      out += '$';
      i += 2;
    } else if (next === '(') {
      const close = input.indexOf(')', i + 2);
      if (close < 0) {
        // unterminated reference: kept as written
        out += input.slice(i);
        break;
      }
      const name = input.slice(i + 2, close);
      const value = name === '' ? undefined : lookup(name);
      out += value ?? `$(${name})`;
      i = close + 1;
    } else {
      out += '$' + next;
      i += 2;
    }
  }
  return out;
}

const b64 = (s: string) => Buffer.from(s, 'base64').toString('utf8');

function fieldValue(pod: KObject, fieldPath: string, src: EnvSources): string {
  const md = pod.metadata;
  const sub = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(fieldPath);
  if (sub) {
    const map = sub[1] === 'labels' ? md.labels : md.annotations;
    return map?.[sub[2]!] ?? '';
  }
  const asList = (m?: Record<string, string>) =>
    Object.keys(m ?? {})
      .sort()
      .map((k) => `${k}=${JSON.stringify(m![k])}`)
      .join('\n');
  switch (fieldPath) {
    case 'metadata.name':
      return md.name;
    case 'metadata.namespace':
      return md.namespace ?? '';
    case 'metadata.uid':
      return md.uid ?? '';
    case 'metadata.labels':
      return asList(md.labels);
    case 'metadata.annotations':
      return asList(md.annotations);
    case 'spec.nodeName':
      return pod.spec?.nodeName ?? '';
    case 'spec.serviceAccountName':
      return pod.spec?.serviceAccountName ?? '';
    case 'status.hostIP':
    case 'status.hostIPs':
      return src.hostIP;
    case 'status.podIP':
    case 'status.podIPs':
      return src.podIP;
    default:
      throw new ContainerConfigError(`unsupported fieldRef ${fieldPath}`);
  }
}

function resourceValue(container: any, ref: { resource: string; divisor?: string }, src: EnvSources): string {
  const [kind, res] = ref.resource.split('.') as [string, string];
  let q: string | undefined = container.resources?.[kind]?.[res];
  if (q === undefined && kind === 'limits') q = src.nodeAllocatable[res];
  if (q === undefined && kind === 'requests') q = container.resources?.limits?.[res] ?? '0';
  const value = parseQuantity(q ?? '0');
  const divisor = parseQuantity(ref.divisor ?? '1') || 1;
  // The kubelet rounds up (a cpu of 500m with divisor 1 reads as 1).
  return String(Math.ceil(value / divisor));
}

/** Returns the environment as an ordered list of [name, value]. Throws ContainerConfigError. */
export async function resolveEnv(pod: KObject, container: any, src: EnvSources): Promise<Array<[string, string]>> {
  const ns = pod.metadata.namespace ?? 'default';
  const tmp = new Map<string, string>();
  const secrets = new Map<string, KObject>();
  const configMaps = new Map<string, KObject>();

  const getSecret = async (name: string, optional: boolean): Promise<KObject | null> => {
    if (secrets.has(name)) return secrets.get(name)!;
    const s = await src.secret(ns, name);
    if (!s) {
      if (optional) return null;
      throw new ContainerConfigError(`secret "${name}" not found`);
    }
    secrets.set(name, s);
    return s;
  };
  const getConfigMap = async (name: string, optional: boolean): Promise<KObject | null> => {
    if (configMaps.has(name)) return configMaps.get(name)!;
    const c = await src.configMap(ns, name);
    if (!c) {
      if (optional) return null;
      throw new ContainerConfigError(`configmap "${name}" not found`);
    }
    configMaps.set(name, c);
    return c;
  };

  for (const from of container.envFrom ?? []) {
    const prefix: string = from.prefix ?? '';
    if (from.configMapRef) {
      const cm = await getConfigMap(from.configMapRef.name, from.configMapRef.optional === true);
      for (const [k, v] of Object.entries(cm?.data ?? {})) tmp.set(prefix + k, v);
    } else if (from.secretRef) {
      const s = await getSecret(from.secretRef.name, from.secretRef.optional === true);
      for (const [k, v] of Object.entries(s?.data ?? {})) tmp.set(prefix + k, b64(v));
    }
  }

  const lookup = (name: string) => tmp.get(name) ?? src.serviceEnv[name];
  for (const e of container.env ?? []) {
    let value: string = e.value ?? '';
    if (value !== '') {
      value = expand(value, lookup);
    } else if (e.valueFrom) {
      const vf = e.valueFrom;
      if (vf.fieldRef) {
        value = fieldValue(pod, vf.fieldRef.fieldPath, src);
      } else if (vf.resourceFieldRef) {
        value = resourceValue(container, vf.resourceFieldRef, src);
      } else if (vf.configMapKeyRef) {
        const { name, key } = vf.configMapKeyRef;
        const optional = vf.configMapKeyRef.optional === true;
        const cm = await getConfigMap(name, optional);
        if (!cm) continue;
        if (cm.data?.[key] === undefined) {
          if (optional) continue;
          throw new ContainerConfigError(`couldn't find key ${key} in ConfigMap ${ns}/${name}`);
        }
        value = cm.data[key]!;
      } else if (vf.secretKeyRef) {
        const { name, key } = vf.secretKeyRef;
        const optional = vf.secretKeyRef.optional === true;
        const s = await getSecret(name, optional);
        if (!s) continue;
        if (s.data?.[key] === undefined) {
          if (optional) continue;
          throw new ContainerConfigError(`couldn't find key ${key} in Secret ${ns}/${name}`);
        }
        value = b64(s.data[key]!);
      }
    }
    tmp.set(e.name, value);
  }

  const out: Array<[string, string]> = [...tmp];
  for (const [k, v] of Object.entries(src.serviceEnv)) if (!tmp.has(k)) out.push([k, v]);
  return out;
}

const envName = (s: string) => s.toUpperCase().replace(/-/g, '_');

/** The service link variables (pkg/kubelet/envvars FromServices) of the Services given. */
export function serviceLinkEnv(services: KObject[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const svc of services) {
    const ip: string | undefined = svc.spec?.clusterIP;
    if (!ip || ip === 'None') continue;
    const prefix = envName(svc.metadata.name);
    const ports: any[] = svc.spec?.ports ?? [];
    out[`${prefix}_SERVICE_HOST`] = ip;
    if (ports.length) out[`${prefix}_SERVICE_PORT`] = String(ports[0].port);
    for (const p of ports) if (p.name) out[`${prefix}_SERVICE_PORT_${envName(p.name)}`] = String(p.port);
    ports.forEach((p, i) => {
      const proto = String(p.protocol ?? 'TCP');
      const hostPort = `${ip}:${p.port}`;
      if (i === 0) out[`${prefix}_PORT`] = `${proto.toLowerCase()}://${hostPort}`;
      const pp = `${prefix}_PORT_${p.port}_${proto.toUpperCase()}`;
      out[pp] = `${proto.toLowerCase()}://${hostPort}`;
      out[`${pp}_PROTO`] = proto.toLowerCase();
      out[`${pp}_PORT`] = String(p.port);
      out[`${pp}_ADDR`] = ip;
    });
  }
  return out;
}
