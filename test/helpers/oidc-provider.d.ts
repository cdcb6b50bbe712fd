// The little of oidc-provider (which ships no types) that the tests' OpenID provider uses.
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';

  export interface KoaLikeContext {
    path: string;
    method: string;
    body: unknown;
    oidc?: { route?: string; client?: { clientId: string }; session?: { accountId?: string; grantIdFor(clientId: string): string | undefined }; result?: { consent?: { grantId?: string } }; provider: Provider };
  }

  export interface GrantInstance {
    addOIDCScope(scope: string): void;
    addOIDCClaims(claims: string[]): void;
    save(): Promise<string>;
  }

  export default class Provider {
    constructor(issuer: string, configuration: Record<string, unknown>);
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    use(middleware: (ctx: KoaLikeContext, next: () => Promise<void>) => Promise<void>): void;
    on(event: string, listener: (...args: unknown[]) => void): void;
    Grant: {
      new (init: { clientId: string; accountId: string | undefined }): GrantInstance;
      find(id: string): Promise<GrantInstance | undefined>;
    };
  }
}
