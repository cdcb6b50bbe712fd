// The Models page and its JSON twin, over the catalog the gateway beside this dashboard serves.
import type Router from '@koa/router';
import type { Context } from 'koa';
import type { CatalogSnapshot } from '../catalog/snapshot.js';
import type { Html } from './html.js';
import { apiModel, modelsPageHtml } from './model-pages.js';
import { need } from './route-guards.js';
import { who, type DashboardState } from './state.js';

export function modelRoutes(router: Router<DashboardState>, deps: { models: (() => CatalogSnapshot) | undefined; send: (ctx: Context, page: Html) => void }): void {
  router.get('/models', need('models.view'), (ctx) => {
    deps.send(ctx, modelsPageHtml(who(ctx), deps.models?.().models));
  });
  router.get('/api/models', need('models.view'), (ctx) => {
    ctx.body = { models: (deps.models?.().models ?? []).map(apiModel) };
  });
}
