// The ledger's Redis connection: one server (Redis) or a Redis Cluster (Cluster). Every command the
// ledger, account store and journal send names keys of a single hash slot, so both clients run them.
import type { Cluster, Redis } from 'ioredis';

export type RedisClient = Redis | Cluster;

/** Every server that answers for keys now: the one server, or each master of a cluster. */
export function primaries(client: RedisClient): Redis[] {
  return 'nodes' in client ? client.nodes('master') : [client];
}
