// The connector side of a source's dashboard page: whether the source's account at the
// connector provider is connected, and the Connect button, which starts the provider's sign-in
// (POST /sources/{id}/connect) and sends the browser there. The provider sends it back through
// the service's callback to the source's page, with `done=connected` or `done=not-connected`.
import type { FastifyReply } from 'fastify';
import type { ConnectorToolkit } from '../../domain/connector/types.ts';
import type { Deps } from '../../domain/deps.ts';
import type { Viewer } from '../../domain/users.ts';
import { AppError } from '../../lib/errors.ts';
import { startSourceConnect } from '../../runner/source-connect.ts';
import type { Source } from '../../schemas/source.ts';
import { viewerOf } from '../auth.ts';
import { type Html, html } from '../html.ts';
import { badge, csrfField } from '../layout.ts';
import { type Flash, isUuid } from '../page-kit.ts';
import type { WebScope } from '../plugin.ts';

export const CONNECT_DONE: Record<string, string> = {
  connected: 'Signed in at the connector provider: the source is connected.',
  'not-connected':
    'The connector provider does not report the source as connected yet; connect again if the sign-in did not finish.',
};

/** The source's connector rows of its page (nothing for another authType). */
export function connectorRows(source: Source): Html | string {
  if (source.authType !== 'connector') return '';
  const state = source.connectorConnected ? 'connected' : 'not connected';
  return html`<tr><th scope="row">Toolkit</th><td>${source.authConfig?.provider ? html`<code>${source.authConfig.provider}</code>` : html`<span class="muted">not set: edit the source and name its toolkit</span>`}</td></tr>
  <tr><th scope="row">Connector</th><td>${badge(state === 'connected' ? 'active' : 'inactive')} ${state}</td></tr>`;
}

/** The provider's toolkits as suggestions of the form's toolkit field (`list="toolkits"`). */
export function toolkitSuggestions(toolkits: readonly ConnectorToolkit[]): Html | string {
  if (toolkits.length === 0) return '';
  return html`<datalist id="toolkits">${toolkits.map((t) => html`<option value="${t.slug}">${t.name}</option>`)}</datalist>`;
}

/** The Connect button of a connector source (Reconnect once connected). */
export function connectButton(viewer: Viewer, source: Source): Html | string {
  if (source.authType !== 'connector') return '';
  return html`<form method="post" action="/dashboard/sources/${source.id}/connect" class="inline">${csrfField(viewer.csrfToken)}<button type="submit">${source.connectorConnected ? 'Reconnect' : 'Connect'}</button></form>`;
}

export function sourceConnectPages(
  scope: WebScope,
  deps: Deps,
  o: {
    section: string;
    missing: (reply: FastifyReply, viewer: Viewer) => unknown;
    show: (reply: FastifyReply, viewer: Viewer, id: string, status: number, flash: Flash) => Promise<unknown>;
  },
): void {
  scope.post<{ Params: { id: string } }>(`${o.section}/:id/connect`, async (request, reply) => {
    const viewer = viewerOf(request);
    const id = request.params.id;
    if (!isUuid(id)) return o.missing(reply, viewer);
    try {
      const { url } = await startSourceConnect(deps, viewer.organizationId, id);
      return reply.redirect(url, 303);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      if (err.code === 'not_found') return o.missing(reply, viewer);
      return o.show(reply, viewer, id, err.status, { kind: 'error', text: err.message });
    }
  });
}
