/** What the topology log specs share: the messages of a one-server topology's life. */

/** The messages of a one-server topology's life (the unified tests logging-standalone and logging-loadbalanced). */
export const ONE_SERVER_LIFE: readonly string[] = [
  'Starting topology monitoring',
  'Topology description changed',
  'Starting server monitoring',
  'Topology description changed',
  'Stopped server monitoring',
  'Topology description changed',
  'Stopped topology monitoring',
];
