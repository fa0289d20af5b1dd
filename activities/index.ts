// Every activity the workers run, bound to their dependencies (Kubernetes client, settings, log).
import type { ActivityDeps } from './common.ts';
import { formActivities } from './form.ts';
import { observerActivities } from './observer.ts';
import { operationActivities } from './operation.ts';
import { upgradeActivities } from './upgrade.ts';

export function createActivities(deps: ActivityDeps) {
  return {
    ...operationActivities(deps),
    ...formActivities(deps),
    ...upgradeActivities(deps),
    ...observerActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
export type { ActivityDeps, ClusterRef } from './common.ts';
