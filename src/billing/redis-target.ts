// Where the ledger's Redis is: one server (REDIS_URL) or a Redis Cluster, named by REDIS_CLUSTER_NODES
// (host:port,host:port) or by a redis+cluster:// URL in REDIS_URL. Credentials and TLS ride in the URL.

export interface ClusterNode {
  host: string;
  port: number;
}

export type RedisTarget =
  | { kind: 'single'; url: string }
  | { kind: 'cluster'; nodes: ClusterNode[]; username?: string; password?: string; tls: boolean };

function node(text: string, source: string): ClusterNode {
  const m = /^\[?([^\]\s]+?)\]?:(\d{1,5})$/.exec(text.trim());
  const port = m ? Number(m[2]) : NaN;
  if (!m || !m[1] || port < 1 || port > 65535) {
    throw new Error(`${source}: "${text.trim()}" is not host:port (expected a comma-separated list such as redis-0:6379,redis-1:6379)`);
  }
  return { host: m[1], port };
}

function nodeList(list: string, source: string): ClusterNode[] {
  const parts = list.split(',').filter((p) => p.trim() !== '');
  if (parts.length === 0) throw new Error(`${source} names no cluster node`);
  return parts.map((p) => node(p, source));
}

/** Reads the ledger's Redis from the environment's two settings; undefined means the memory ledger. */
export function redisTarget(redisUrl: string | undefined, clusterNodes: string | undefined): RedisTarget | undefined {
  if (clusterNodes !== undefined && clusterNodes.trim() !== '') {
    // Credentials of a plain REDIS_URL beside the node list apply to every node.
    const creds = redisUrl && /^rediss?:\/\//.test(redisUrl) ? new URL(redisUrl) : undefined;
    return {
      kind: 'cluster',
      nodes: nodeList(clusterNodes, 'REDIS_CLUSTER_NODES'),
      ...(creds?.username ? { username: decodeURIComponent(creds.username) } : {}),
      ...(creds?.password ? { password: decodeURIComponent(creds.password) } : {}),
      tls: creds?.protocol === 'rediss:',
    };
  }
  if (redisUrl === undefined || redisUrl === '') return undefined;
  const cluster = /^(rediss?)\+cluster:\/\/(?:([^@/]*)@)?([^/?#]+)/.exec(redisUrl);
  if (cluster === null) return { kind: 'single', url: redisUrl };
  const [user, pass] = (cluster[2] ?? '').split(':', 2).map((s) => decodeURIComponent(s));
  // As in a redis:// URL: user:password@, :password@ (default user) or user@.
  const auth: { username?: string; password?: string } = {};
  if (user) auth.username = user;
  if (pass !== undefined && pass !== '') auth.password = pass;
  return { kind: 'cluster', nodes: nodeList(cluster[3] ?? '', 'REDIS_URL'), ...auth, tls: cluster[1] === 'rediss' };
}
