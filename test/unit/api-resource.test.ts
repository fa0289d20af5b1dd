import { describe, expect, it } from 'vitest';
import { apiResource } from '../../metrics.ts';

describe('apiResource: what a request to the API server is about, for the request counter', () => {
  it.each([
    ['/api/v1/namespaces/ns/pods/demo-0', 'pods'],
    ['/api/v1/namespaces/ns/pods?labelSelector=a%3Db', 'pods'],
    ['/api/v1/pods?watch=true&resourceVersion=12', 'pods'],
    ['/apis/apps/v1/namespaces/ns/statefulsets/demo', 'statefulsets'],
    ['/apis/queenmq.com/v1alpha1/namespaces/ns/queenclusters/demo/status', 'queenclusters/status'],
    ['/apis/queenmq.com/v1alpha1/queenclusters?watch=1', 'queenclusters'],
    ['/api/v1/namespaces/ns/persistentvolumeclaims/data-demo-0', 'persistentvolumeclaims'],
    ['/api/v1/namespaces/ns', 'namespaces'],
    ['/api/v1/namespaces', 'namespaces'],
    ['/apis/coordination.k8s.io/v1/namespaces/ns/leases/x', 'leases'],
    ['/api/v1/namespaces/ns/pods/demo-0/eviction', 'pods/eviction'],
    ['/apis', 'other'],
    ['/version', 'other'],
  ])('%s is %s', (path, resource) => {
    expect(apiResource(path)).toBe(resource);
  });
});
