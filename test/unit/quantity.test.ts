// The one quantity grammar: what the operator reads, with the value Kubernetes gives it. The values
// are the ones resource.ParseQuantity(...).Value() of k8s.io/apimachinery v0.36 gives; the API
// server's side of the same forms runs in test/e2e/quantities.test.ts.
import { describe, expect, it } from 'vitest';
import { parseQuantity, QUANTITY_PATTERN } from '../../crd/quantity.ts';
import { neededOperation } from '../../plan/decide.ts';
import { cluster } from './fixture.ts';

describe('quantities', () => {
  it.each<[string, number]>([
    ['0', 0],
    ['1', 1],
    ['50Gi', 50 * 1024 ** 3],
    ['1.5Gi', 1536 * 1024 ** 2],
    ['1Ki', 1024],
    ['8Pi', 8 * 1024 ** 5],
    ['100M', 100e6],
    ['1k', 1000],
    ['1e11', 1e11],
    ['1E11', 1e11],
    ['1.5e11', 1.5e11],
    ['1e+3', 1000],
    ['1e-3', 1],
    ['1E', 1e18],
    ['1m', 1],
    ['1500m', 2],
    ['1u', 1],
    ['1n', 1],
    ['1.', 1],
    ['.5', 1],
    ['+1Gi', 1024 ** 3],
    ['00012', 12],
    ['7Ei', 7 * 1024 ** 6],
  ])('%s is %d', (text, value) => {
    expect(parseQuantity(text)).toBe(value);
  });

  it.each([
    // not in the grammar: no digits, a suffix Kubernetes does not know, spaces, a fractional exponent
    '', '+', '.', 'Gi', 'e3', '1gi', '1K', '1ki', '1e', '1e+', '1e3.5', ' 1Gi', '1Gi ', '1GiB', '1.0.0', '0x10', '1_000', 'big',
    // 2^63 or more: the API server keeps no such value
    '8Ei', '1e19', '9.3e18', '1e99', '1e9999999999',
  ])('%j is not read', (text) => {
    expect(parseQuantity(text)).toBeNaN();
  });

  it('reads what the grammar matches, and nothing else (below 2^63)', () => {
    const grammar = new RegExp(QUANTITY_PATTERN);
    for (const text of ['1Gi', '1e11', '.5', '1.', '-1', '-1.5Gi', '1GiB', '1K', '', '+', 'Gi', '1e3.5']) {
      expect(grammar.test(text), text).toBe(!Number.isNaN(parseQuantity(text)));
    }
  });

  it('a size written with an exponent grows the volumes (it read as NaN, and nothing grew)', () => {
    const obs = cluster(3, 3, 1);
    const view = (size: string) => ({
      qc: {
        apiVersion: 'queenmq.com/v1alpha1' as const,
        kind: 'QueenCluster' as const,
        metadata: { name: 'queen', namespace: 'queen', uid: 'u1' },
        spec: { version: '2.6.0', secretName: 'queen', storage: { size } },
        status: { voters: [1, 2, 3] },
      },
      wantedSpecHash: 'spec',
      wantedTemplateHash: 'new',
      statefulSet: obs.statefulSet,
      servicesPresent: true,
      pods: obs.pods,
      claims: obs.claims,
    });
    // The claims hold 50Gi (53.7e9 bytes).
    expect(neededOperation(view('1e11'))).toEqual({ type: 'GrowVolumes', fingerprint: 'size:1e11', target: 'volumes of 1e11' });
    expect(neededOperation(view('5e10'))).toBeNull();
  });
});
