// What a failed step becomes (issue 8, item 8): an answer of the API server that no retry can
// change ends the step, in the step's words with the API server's; anything else is retried.
import { ApiException } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import type { ActivityDeps } from '../../activities/common.ts';
import { REFUSED_CODES, refusalStands, retried, stepFailure, stepWords } from '../../activities/guard.ts';
import { KubeApiError } from '../../activities/kube.ts';

const deps = {} as ActivityDeps;
const ref = { namespace: 'queen', name: 'queen', uid: 'u1' };

describe('a refusal of the API server ends the step', () => {
  it('422 from an admission policy: non-retryable, Refused, with the step and the answer', async () => {
    const err = new KubeApiError(422, 'statefulsets.apps "queen" is invalid: frozen', {});
    const f = (await stepFailure(deps, 'applyPodTemplate', [ref], err)) as ApplicationFailure;
    expect(f).toBeInstanceOf(ApplicationFailure);
    expect(f.type).toBe('Refused');
    expect(f.nonRetryable).toBe(true);
    expect(f.message).toBe('applying the new pod template: the API server refused it (422): statefulsets.apps "queen" is invalid: frozen');
  });
  it('403 is a refusal from the second attempt on, while the API server says it is ready (not one that has just started)', async () => {
    const ready = (r: boolean) => async () => r;
    expect(await refusalStands(403, () => 1, ready(true))).toBe(false);
    expect(await refusalStands(403, () => 2, ready(false))).toBe(false);
    expect(await refusalStands(403, () => 2, ready(true))).toBe(true);
    expect(await refusalStands(422, () => 1, ready(false))).toBe(true);
  });
  it('the bookkeeping of an operation is retried whatever the answer', async () => {
    const err = new KubeApiError(422, 'invalid', {});
    // Not turned into a refusal: it goes on to the retry path (which reads the activity's attempt,
    // and outside an activity says so).
    await expect(stepFailure(deps, 'endOperation', [ref], err)).rejects.toThrow(/activity/i);
  });
  it('conflicts, throttling, a missing object and 5xx are not refusals', () => {
    for (const code of [404, 409, 429, 500, 503]) expect(REFUSED_CODES.has(code)).toBe(false);
    for (const code of [400, 403, 422]) expect(REFUSED_CODES.has(code)).toBe(true);
  });
  it('a retried answer of the API server is one line with the step, not the client message with its headers', () => {
    // The client's exception for a 401 without a body (a token bound to a deleted pod).
    const err = new ApiException(401, 'Unauthorized', undefined, { 'audit-id': 'a1', 'content-type': 'application/json' });
    expect(err.message).toMatch(/^HTTP-Code: 401\nMessage: Unauthorized/);
    const f = retried('applying the new pod template', err) as ApplicationFailure;
    expect(f).toBeInstanceOf(ApplicationFailure);
    expect(f.nonRetryable).toBe(false);
    expect(f.type).toBe('ApiServer401');
    expect(f.message).toBe('applying the new pod template: the API server refuses our credentials (401): the token or certificate of the kubeconfig is not valid there');
    const busy = retried('restarting pod 2', new KubeApiError(503, 'the server is currently unable to handle the request', {})) as ApplicationFailure;
    expect(busy.message).toBe('restarting pod 2: the API server answered 503: the server is currently unable to handle the request');
    // Anything else (a connection refused, a timeout) goes on as it is.
    const reset = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    expect(retried('restarting pod 2', reset)).toBe(reset);
  });
  it('names the step in the words of the step list', () => {
    expect(stepWords('restartPod', [ref, { ordinal: 2 }])).toBe('restarting pod 2');
    expect(stepWords('restartPod', [ref, { ordinal: 2 }, { message: 'restarting pod 2 to finish growing its volume' }])).toBe('restarting pod 2 to finish growing its volume');
    expect(stepWords('scalePods', [ref, 5, 'adding pods for 5 voters'])).toBe('adding pods for 5 voters');
    expect(stepWords('promoteNodes', [ref, [4, 5], 'Scaling'])).toBe('promoting nodes 4 and 5 to voters');
  });
});
