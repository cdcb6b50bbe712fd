// One module per upstream wire format (see types.ts); this picks the one an upstream speaks.
import type { WireFormat } from '../../wire/format.js';
import { anthropicUpstream } from './anthropic.js';
import { openaiUpstream } from './openai.js';
import type { UpstreamFormat } from './types.js';

export { credentialHeaders, type ClientProtocolHeaders, type CredentialsHeader, type UpstreamFormat } from './types.js';
export { ANTHROPIC_VERSION } from './anthropic.js';

const FORMATS: Record<WireFormat, UpstreamFormat> = { openai: openaiUpstream, anthropic: anthropicUpstream };

export function upstreamFormat(format: WireFormat): UpstreamFormat {
  return FORMATS[format];
}
