// The peer gateways the bench runs beside Tollgate, in the order of the tables.
import { bifrost, bifrostWithGovernance } from './bifrost.js';
import { litellm, litellmWithDatabase } from './litellm.js';
import type { PeerSetup } from './peer.js';
import { portkey } from './portkey.js';

export const PEERS: readonly PeerSetup[] = [portkey, litellm, litellmWithDatabase, bifrost, bifrostWithGovernance];
