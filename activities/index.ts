// Every activity the workers run, bound to their dependencies (Kubernetes client, settings, log).
import type { ActivityDeps } from './common.ts';
import { backupActivities } from './backup.ts';
import { formActivities } from './form.ts';
import { gateActivities } from './gate.ts';
import { growActivities } from './grow.ts';
import { guarded } from './guard.ts';
import { membershipActivities } from './membership.ts';
import { observerActivities, type ObserverRounds } from './observer.ts';
import { operationActivities } from './operation.ts';
import { promoteActivities } from './promote.ts';
import { switchoverActivities } from './switchover.ts';
import { replaceActivities } from './replace.ts';
import { restoreActivities } from './restore.ts';
import { scaleActivities } from './scale.ts';
import { upgradeActivities } from './upgrade.ts';

/** Every activity, each kept alive by heartbeats and its failures classified and told (guard.ts). */
export function createActivities(deps: ActivityDeps, rounds: ObserverRounds) {
  return guarded(deps, stepsOf(deps, rounds));
}

function stepsOf(deps: ActivityDeps, rounds: ObserverRounds) {
  return {
    ...operationActivities(deps),
    ...formActivities(deps),
    ...gateActivities(deps),
    ...membershipActivities(deps),
    ...upgradeActivities(deps),
    ...replaceActivities(deps),
    ...scaleActivities(deps),
    ...growActivities(deps),
    ...promoteActivities(deps),
    ...switchoverActivities(deps),
    ...observerActivities(deps, rounds),
    ...backupActivities(deps),
    ...restoreActivities(deps),
  };
}

export type Activities = ReturnType<typeof stepsOf>;
export type { ActivityDeps, ClusterRef } from './common.ts';
