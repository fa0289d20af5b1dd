// The workflows the worker runs. Deterministic code only: every side effect is an activity.
export { formCluster } from './form-cluster.ts';
export { restoreCluster } from './restore-cluster.ts';
export { rollingUpgrade } from './rolling-upgrade.ts';
export { replaceNode } from './replace-node.ts';
export { scaleVoters } from './scale-voters.ts';
export { growVolumes } from './grow-volumes.ts';
export { promoteStandby } from './promote-standby.ts';
export { switchover } from './switchover.ts';
export { clusterObserver } from './observer.ts';
export { takeBackup } from './backup.ts';
export { yieldSignal } from './operation.ts';
