// A PodDisruptionBudget's selector in the API server's query syntax: the operator asks the API
// server which pods a budget selects (to name the budgets that make the Eviction API refuse a pod).
import { expect, it } from 'vitest';
import { selectorQuery } from '../../activities/kube.ts';

it('matchLabels and every matchExpressions operator, in the syntax of ?labelSelector=', () => {
  expect(
    selectorQuery({
      matchLabels: { 'app.kubernetes.io/instance': 'queen' },
      matchExpressions: [
        { key: 'statefulset.kubernetes.io/pod-name', operator: 'In', values: ['queen-0', 'queen-1'] },
        { key: 'tier', operator: 'NotIn', values: ['cache'] },
        { key: 'team', operator: 'Exists' },
        { key: 'canary', operator: 'DoesNotExist' },
      ],
    }),
  ).toBe('app.kubernetes.io/instance=queen,statefulset.kubernetes.io/pod-name in (queen-0,queen-1),tier notin (cache),team,!canary');
});

it('an empty selector is an empty query: every pod, as a policy/v1 budget with an empty selector', () => {
  expect(selectorQuery({})).toBe('');
});
