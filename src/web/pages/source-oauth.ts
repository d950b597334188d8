// The OAuth sign-in of a source on the dashboard: its state on the source page (connected,
// expired, never connected) with a Connect or Reconnect button (its route is source-connect.ts's,
// shared with connector sources), and the public callback the provider sends the
// browser back to.
import type { Deps } from '../../domain/deps.ts';
import {
  OAUTH_CALLBACK_PATH,
  type OAuthConnectionState,
  oauthConnectionState,
} from '../../domain/source-oauth.ts';
import type { Viewer } from '../../domain/users.ts';
import { finishSourceConnect } from '../../runner/source-oauth.ts';
import type { Source } from '../../schemas/source.ts';
import { type Html, html } from '../html.ts';
import { csrfField, page } from '../layout.ts';
import { sendHtml } from '../page-kit.ts';
import type { WebScope } from '../plugin.ts';

const section = '/dashboard/sources';

const STATE_TEXT: Record<OAuthConnectionState, string> = {
  connected: 'connected',
  expired: 'expired',
  never_connected: 'never connected',
};

/** The sign-in section of an oauth source's page; nothing for other sources. */
export async function connectionPanel(deps: Deps, viewer: Viewer, source: Source): Promise<Html | undefined> {
  if (source.authType !== 'oauth') return undefined;
  const { state, failure } = await oauthConnectionState(deps, viewer.organizationId, source.id);
  const action = state === 'never_connected' ? 'Connect' : 'Reconnect';
  const ac = source.authConfig ?? {};
  const setting = (label: string, value: string | undefined) =>
    value ? html`<tr><th scope="row">${label}</th><td>${value}</td></tr>` : '';
  const settings = [
    setting(
      'Client',
      ac.provider ? `${ac.provider} (SVC_OAUTH_CLIENTS)` : 'registered with the server on connect',
    ),
    setting('Authorization endpoint', ac.authorizationUrl),
    setting('Token endpoint', ac.tokenUrl),
    setting('Scopes', ac.scope),
  ];
  return html`<section aria-labelledby="sign-in-title"><h2 id="sign-in-title">Sign-in</h2>
<div class="table-wrap"><table><tbody>${settings}</tbody></table></div>
<p>OAuth: <span class="badge ${state === 'connected' ? 'active' : 'inactive'}" id="oauth-state">${STATE_TEXT[state]}</span>
${state === 'expired' ? html` <span class="muted" id="oauth-failure">${failure ?? ''} Runs that use this source fail until it is reconnected.</span>` : ''}</p>
<form method="post" action="${section}/${source.id}/connect" class="inline">${csrfField(viewer.csrfToken)}<button type="submit" id="oauth-connect">${action}</button></form>
</section>`;
}

function problemPage(viewer: Viewer | undefined, message: string, sourceId?: string): string {
  return page(
    { title: 'Sign-in failed', viewer, section },
    html`<h1>Sign-in failed</h1><p role="alert" id="oauth-problem">${message}</p>
${sourceId && viewer ? html`<p><a href="${section}/${sourceId}">Back to the source</a></p>` : ''}`,
  );
}

/**
 * The callback (public: the provider's redirect carries no session of ours, and a sign-in
 * started through the API has none). The state alone says whose sign-in it is.
 */
export function oauthCallbackPage(scope: WebScope, deps: Deps): void {
  scope.get<{ Querystring: Record<string, unknown> }>(OAUTH_CALLBACK_PATH, async (request, reply) => {
    const q = request.query ?? {};
    const text = (name: string) => (typeof q[name] === 'string' ? (q[name] as string) : undefined);
    const outcome = await finishSourceConnect(deps, {
      ...(text('state') !== undefined && { state: text('state') }),
      ...(text('code') !== undefined && { code: text('code') }),
      ...(text('error') !== undefined && { error: text('error') }),
      ...(text('error_description') !== undefined && { error_description: text('error_description') }),
    });
    if (outcome.ok) return reply.redirect(`${section}/${outcome.sourceId}?done=signed-in`, 303);
    return sendHtml(reply, 400, problemPage(request.viewer, outcome.message, outcome.sourceId));
  });
}
