// The page of a refused SSO sign-in, in the dashboard's look: what went wrong, and the ways on.
import { html, type Html } from './html.js';
import { errorBox, layout } from './pages.js';

export function ssoRefusedPage(provider: { name: string; href: string }, message: string): Html {
  return layout(
    'Sign-in refused',
    undefined,
    html`<h1>Sign-in through ${provider.name} did not work</h1>${errorBox(message)}<p><a href="${provider.href}">Sign in with ${provider.name} again</a> · <a href="/sign-in">Back to the sign-in page</a></p>`,
  );
}
