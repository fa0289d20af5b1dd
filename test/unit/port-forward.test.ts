// `kubectl port-forward` to an operator pod's /healthz, /readyz and /metrics: the container runtime
// connects to the port on the pod's loopback (127.0.0.1 in the pod's network namespace), while the
// kubelet's probes and Prometheus reach the pod's IP. The operator, started with the arguments
// and environment the installed Deployments give it ($(VAR) expanded as the kubelet does, POD_IP
// a pod address), must answer on both.
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { serve } from '../../health.ts';
import { parseOptions, type Options } from '../../options.ts';

/** A pod IP this machine has: every address of 127.0.0.0/8 is its loopback's. */
const POD_IP = '127.0.0.57';

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { fieldRef?: { fieldPath: string } };
}

/** The operator container of the Deployment in a manifest of deploy/. */
function operatorContainer(file: string): { args: string[]; env: EnvVar[] } {
  const text = readFileSync(fileURLToPath(new URL(`../../deploy/${file}`, import.meta.url)), 'utf8');
  const deployment = parseAllDocuments(text)
    .map((d) => d.toJSON() as { kind?: string; spec?: { template: { spec: { containers: Array<{ args?: string[]; env?: EnvVar[] }> } } } } | null)
    .find((d) => d?.kind === 'Deployment');
  const c = deployment!.spec!.template.spec.containers[0]!;
  return { args: c.args ?? [], env: c.env ?? [] };
}

/** The container's environment and arguments as the kubelet gives them: $(VAR) of earlier variables expanded. */
function asKubeletGives(c: { args: string[]; env: EnvVar[] }): { argv: string[]; env: Record<string, string> } {
  const fields: Record<string, string> = { 'status.podIP': POD_IP, 'metadata.name': 'queen-operator-0', 'metadata.namespace': 'queen-system' };
  const env: Record<string, string> = {};
  const expand = (s: string) => s.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (whole, name: string) => env[name] ?? whole);
  for (const e of c.env) env[e.name] = e.value !== undefined ? expand(e.value) : fields[e.valueFrom?.fieldRef?.fieldPath ?? ''] ?? '';
  return { argv: c.args.map(expand), env };
}

async function answers(host: string, port: number): Promise<boolean> {
  try {
    return (await fetch(`http://${host}:${port}/healthz`)).ok;
  } catch {
    return false;
  }
}

describe.each(['install.yaml', 'namespaced.yaml'])('the operator of deploy/%s', (file) => {
  it('answers on the pod loopback (kubectl port-forward) and on the pod IP (probes, Prometheus)', async () => {
    const { argv, env } = asKubeletGives(operatorContainer(file));
    const opts = parseOptions(argv, env) as Options;
    // The endpoints listen where the operator's flags say, on a free port.
    const server = await serve('the health endpoints', 0, opts.bindAddress, { '/healthz': (_req, res) => void res.end('ok') });
    try {
      const { port } = server.address() as AddressInfo;
      expect({ loopback: await answers('127.0.0.1', port), podIp: await answers(POD_IP, port) }).toEqual({ loopback: true, podIp: true });
    } finally {
      server.close();
    }
  });
});
