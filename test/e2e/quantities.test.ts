// e2e `quantities`: one quantity grammar. Each form goes to the API server three times, as a
// volume claim's size (the API server's own parser: accepted, or refused as no quantity), as a
// QueenCluster's storage.size and as its resources.requests.memory (the CRD), and through the
// operator's parser. What the CRD accepts, the operator reads, with the value the API server gives
// it; what the API server cannot parse, neither the CRD nor the operator takes. The few forms the
// API server reads although they have no digits ("+", ".", "Gi", "e3": all zero), or with spaces
// around them (trimmed when read from JSON), are refused by the CRD, which says what it takes.
import { CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseQuantity } from '../../crd/quantity.ts';
import { GROUP, PLURAL, VERSION } from '../../crd/schema.ts';
import { scenario, type Scenario } from './harness.ts';

let s: Scenario;
beforeAll(async () => {
  s = await scenario('quantities', { secret: false });
});
afterAll(() => s?.close());

const message = (err: unknown) => {
  const body = (err as { body?: string }).body;
  try {
    return (JSON.parse(body ?? '') as { message: string }).message;
  } catch {
    return String(body ?? err);
  }
};

/** The API server's reading of a form: its canonical text, 'not a quantity', or another refusal (a size must be positive). */
async function apiServerReads(form: string): Promise<{ canonical: string } | { notQuantity: string } | { refused: string }> {
  try {
    const pvc = await s.core.createNamespacedPersistentVolumeClaim({
      namespace: s.ns,
      dryRun: 'All',
      body: { metadata: { name: 'probe' }, spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: form } } } },
    });
    return { canonical: String(pvc.spec!.resources!.requests!.storage) };
  } catch (err) {
    const m = message(err);
    if (/quantities must match the regular expression|unable to parse/.test(m)) return { notQuantity: m };
    return { refused: m };
  }
}

async function crdTakes(spec: Record<string, unknown>): Promise<string | null> {
  try {
    await s.kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: s.ns,
      plural: PLURAL,
      dryRun: 'All',
      body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'QueenCluster', metadata: { name: 'probe' }, spec: { version: '2.6.0', secretName: 'queen', ...spec } },
    });
    return null;
  } catch (err) {
    return message(err);
  }
}

const READ = [
  '1', '50Gi', '1.5Gi', '100M', '1k', '1Ki', '7Ei', '1e11', '1E11', '1.5e11', '1e+3', '1e-3', '15e-1', '1E', '1m', '1500m', '1u', '1n',
  '1.', '.5', '+1Gi', '00012', '0.000001Ki', '123456789012345678',
];
const NOT_QUANTITIES = ['', '1gi', '1K', '1ki', '1e', '1e+', '1e3.5', '1GiB', '1.0.0', '0x10', '1_000', 'big', 'Ei', '1 Gi'];
/** The API server reads them as zero; the grammar has no such form. */
const NO_DIGITS = ['+', '-', '.', 'Gi', 'e3', 'E'];
/** The API server trims spaces around a quantity it reads from JSON; the grammar has none. */
const SPACED = [' 1Gi', '1Gi ', ' 5e9 '];

describe('one quantity grammar for the API server, the CRD and the operator', () => {
  it.each(READ)('%j: the CRD takes it and the operator reads the value the API server gives it', async (form) => {
    const server = await apiServerReads(form);
    expect(server).toHaveProperty('canonical');
    const canonical = (server as { canonical: string }).canonical;
    expect(parseQuantity(form)).toBe(parseQuantity(canonical));
    expect(parseQuantity(form)).toBeGreaterThan(0);
    expect(await crdTakes({ storage: { size: form } })).toBeNull();
    expect(await crdTakes({ resources: { requests: { memory: form } } })).toBeNull();
  });

  it.each(NOT_QUANTITIES)('%j: no quantity for the API server, the CRD or the operator', async (form) => {
    expect(await apiServerReads(form)).toHaveProperty('notQuantity');
    expect(parseQuantity(form)).toBeNaN();
    expect(await crdTakes({ storage: { size: form } })).toMatch(/spec\.storage\.size: Invalid value: ".*": must be a positive quantity such as 50Gi/);
    expect(await crdTakes({ resources: { requests: { memory: form } } })).toMatch(/spec\.resources\.requests\[memory\]: Invalid value: ".*": must be a quantity such as 500m, 4Gi, 4G or 4e9/);
  });

  it.each(NO_DIGITS)('%j: read as zero by the API server, refused by the CRD, not read by the operator', async (form) => {
    const server = await apiServerReads(form);
    // Zero is no size for a claim: the API server parsed it, then refused the value.
    expect(server).toHaveProperty('refused');
    expect((server as { refused: string }).refused).toMatch(/must be greater than zero/);
    expect(parseQuantity(form)).toBeNaN();
    expect(await crdTakes({ storage: { size: form } })).toMatch(/spec\.storage\.size: Invalid value: ".*": must be a positive quantity/);
    expect(await crdTakes({ resources: { requests: { memory: form } } })).toMatch(/spec\.resources\.requests\[memory\]: Invalid value: ".*": must be a quantity such as/);
  });

  it.each(SPACED)('%j: read without its spaces by the API server, refused by the CRD, not read by the operator', async (form) => {
    const server = await apiServerReads(form);
    expect(server).toEqual({ canonical: form.trim() });
    expect(parseQuantity(form)).toBeNaN();
    expect(await crdTakes({ storage: { size: form } })).toMatch(/spec\.storage\.size: Invalid value: ".*": must be a positive quantity/);
    expect(await crdTakes({ resources: { requests: { memory: form } } })).toMatch(/spec\.resources\.requests\[memory\]: Invalid value: ".*": must be a quantity such as/);
  });

  it('a size of zero, or of 2^63 or more, is no size: the CRD refuses it, and the operator reads none above', async () => {
    expect(await crdTakes({ storage: { size: '0' } })).toMatch(/spec\.storage\.size: Invalid value: "0": must be a positive quantity/);
    expect(await crdTakes({ storage: { size: '8Ei' } })).toMatch(/spec\.storage\.size: Invalid value: "8Ei": must be a positive quantity such as 50Gi, 500G or 1e11 \(below 8Ei\)/);
    expect(parseQuantity('8Ei')).toBeNaN();
    expect(await crdTakes({ resources: { requests: { memory: 0 } } })).toBeNull();
  });
});
