// The steps of an operation as `kubectl describe queencluster` lists them (seed 000's step lines):
// what a scenario expects of a primary, and of a standby alike.

/** 3 to 5 voters: both new nodes promoted in one change. */
export const SCALE_UP_3_TO_5 = ['adding pods for 5 voters', 'adding node 4 as a learner', 'adding node 5 as a learner', 'promoting nodes 4 and 5 to voters'];

/** 5 to 3 voters, one node at a time, then their pods together (a leader's hand-off aside). */
export const SCALE_DOWN_5_TO_3 = [
  'removing node 5 from the membership',
  'removing node 4 from the membership',
  'removing the pods above node 3',
  'deleting the volume claim of pod 3',
  'deleting the volume claim of pod 4',
];

/** The replacement of pod `ordinal`, node `node`, once it does not lead. */
export const replaceSteps = (ordinal: number, node: number) => [
  `replacing pod ${ordinal}`,
  `removing node ${node} from the membership`,
  `deleting the volume of pod ${ordinal}`,
  `adding node ${node} as a learner`,
  `promoting node ${node} to voters`,
  `pod ${ordinal} is a voter again`,
];
