// Settings → API keys: each person creates their own keys; a value is shown once.
import type { FastifyReply } from 'fastify';
import { createCappedApiKey, keysForViewer, revokeKeyAs } from '../../domain/api-keys.ts';
import type { Deps } from '../../domain/deps.ts';
import { webhookSecretOf } from '../../domain/organizations.ts';
import type { Viewer } from '../../domain/users.ts';
import { AppError } from '../../lib/errors.ts';
import { field, formOf, viewerOf } from '../auth.ts';
import { inlineScript } from '../csp.ts';
import { type Html, html } from '../html.ts';
import { csrfField, page } from '../layout.ts';
import type { WebScope } from '../plugin.ts';

const when = (iso: string | null) =>
  iso
    ? html`<time datetime="${iso}">${iso.slice(0, 16).replace('T', ' ')} UTC</time>`
    : html`<span class="muted">never</span>`;

/** The owner sees the webhook signing secret: receivers need it to verify deliveries. */
async function webhookSecretSection(deps: Deps, viewer: Viewer) {
  if (viewer.role !== 'owner') return '';
  const secret = await webhookSecretOf(deps, viewer.organizationId);
  if (secret === undefined) return '';
  return html`<details><summary>Webhook signing secret</summary>
<p class="muted">Webhook deliveries are signed with this secret (Standard Webhooks); give it only to your receivers.</p>
<p class="secret">${secret}</p></details>`;
}

async function keysPage(
  deps: Deps,
  viewer: Viewer,
  top: Html | string,
  flash?: { kind: 'ok' | 'error'; text: string },
) {
  const keys = await keysForViewer(deps, viewer);
  const rows = keys.map(
    (k) => html`<tr>
  <td>${k.name}</td><td><code>${k.prefix}…</code></td><td>${when(k.createdAt)}</td><td>${when(k.lastUsedAt)}</td>
  <td>${k.createdBy?.email ?? html`<span class="muted">operator</span>`}</td>
  <td>${k.revokedAt ? html`<span class="badge failed">revoked</span>` : !k.revocable ? html`<span class="muted">owner only</span>` : html`<form method="post" action="/dashboard/keys/${k.id}/revoke">${csrfField(viewer.csrfToken)}<button class="danger" type="submit" aria-label="Revoke ${k.name}">Revoke</button></form>`}</td>
</tr>`,
  );
  return page(
    { title: 'API keys', viewer, section: '/dashboard/keys', flash },
    html`<h1>API keys</h1>${top}
<p>Organization id (the <code>organizationId</code> of API calls): <code id="organization-id">${viewer.organizationId}</code></p>
<p class="muted">Each key gives full access to this organization's API. Give each person and each program its own key, named after where it is used, and revoke it when it is no longer needed.</p>
<form class="stack" method="post" action="/dashboard/keys">${csrfField(viewer.csrfToken)}
  <div><label for="name">Name</label><input id="name" name="name" required maxlength="255" placeholder="e.g. CI pipeline, Alice's laptop"></div>
  <div><button type="submit">Create key</button></div>
</form>
<h2>Keys</h2>
<div class="table-wrap"><table><thead><tr><th scope="col">Name</th><th scope="col">Key</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Created by</th><th scope="col"><span class="muted">Action</span></th></tr></thead>
<tbody>${rows.length ? rows : html`<tr><td colspan="6" class="muted">No keys yet.</td></tr>`}</tbody></table></div>
${await webhookSecretSection(deps, viewer)}`,
  );
}

// The new key's Copy button (the key stays selectable without script).
const COPY_SCRIPT =
  inlineScript(`document.querySelector('[data-copy]').addEventListener('click', async () => {
  await navigator.clipboard.writeText(document.getElementById('key-value').textContent);
  document.getElementById('copied').textContent = 'Copied';
});`);

const send = (reply: FastifyReply, status: number, markup: string) =>
  reply.code(status).type('text/html; charset=utf-8').send(markup);

export function keyPages(scope: WebScope, deps: Deps): void {
  scope.get<{ Querystring: { welcome?: string } }>('/dashboard/keys', async (request, reply) => {
    const viewer = viewerOf(request);
    const welcome = request.query.welcome
      ? html`<div class="flash ok" role="status">Your organization is ready. Create an API key to call the API.</div>`
      : '';
    return send(reply, 200, await keysPage(deps, viewer, welcome));
  });

  scope.post('/dashboard/keys', async (request, reply) => {
    const viewer = viewerOf(request);
    const name = field(formOf(request), 'name');
    if (!name || name.length > 255) {
      return send(
        reply,
        400,
        await keysPage(deps, viewer, '', {
          kind: 'error',
          text: 'Give the key a name (1 to 255 characters).',
        }),
      );
    }
    let apiKey: string;
    try {
      ({ apiKey } = await createCappedApiKey(deps, {
        organizationId: viewer.organizationId,
        name,
        createdByUserId: viewer.userId,
      }));
    } catch (err) {
      // At the cap of keys not revoked: the page again, saying so.
      if (!(err instanceof AppError) || err.code !== 'plan_limit_exceeded') throw err;
      return send(reply, err.status, await keysPage(deps, viewer, '', { kind: 'error', text: err.message }));
    }
    // The value is in this response only: it is stored nowhere but as a hash.
    const shown = html`<section class="card" aria-labelledby="new-key">
<h2 id="new-key">New key “${name}”</h2>
<p><strong>Copy it now: it will not be shown again.</strong></p>
<p class="secret" id="key-value">${apiKey}</p>
<button type="button" class="secondary" data-copy="key-value">Copy</button> <span id="copied" role="status" aria-live="polite"></span>
${COPY_SCRIPT}</section>`;
    return send(reply, 201, await keysPage(deps, viewer, shown));
  });

  scope.post<{ Params: { id: string } }>('/dashboard/keys/:id/revoke', async (request, reply) => {
    const viewer = viewerOf(request);
    try {
      await revokeKeyAs(deps, viewer, request.params.id);
    } catch (err) {
      if (!(err instanceof AppError) || (err.code !== 'not_found' && err.code !== 'forbidden')) throw err;
      const text = err.code === 'not_found' ? 'No such key.' : err.message;
      return send(
        reply,
        err.code === 'not_found' ? 404 : 403,
        await keysPage(deps, viewer, '', { kind: 'error', text }),
      );
    }
    return send(
      reply,
      200,
      await keysPage(deps, viewer, '', {
        kind: 'ok',
        text: 'The key is revoked: the API refuses it from now on.',
      }),
    );
  });
}
