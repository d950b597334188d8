// Members: who belongs to the organization, and invitations by its owner within usersLimit.
import type { FastifyReply } from 'fastify';
import type { Deps } from '../../domain/deps.ts';
import { inviteMember, listInvitations, listMembers, type Viewer } from '../../domain/users.ts';
import { AppError } from '../../lib/errors.ts';
import { field, formOf, viewerOf } from '../auth.ts';
import { type Html, html } from '../html.ts';
import { csrfField, page } from '../layout.ts';
import type { WebScope } from '../plugin.ts';

async function membersPage(
  deps: Deps,
  viewer: Viewer,
  top: Html | string,
  flash?: { kind: 'ok' | 'error'; text: string },
) {
  const [members, invitations] = await Promise.all([
    listMembers(deps, viewer.organizationId),
    listInvitations(deps, viewer.organizationId),
  ]);
  return page(
    { title: 'Members', viewer, section: '/dashboard/members', flash },
    html`<h1>Members</h1>${top}
<div class="table-wrap"><table><thead><tr><th scope="col">Name</th><th scope="col">E-mail</th><th scope="col">Role</th><th scope="col">Last sign-in</th></tr></thead><tbody>
${members.map((m) => html`<tr><td>${m.name ?? ''}</td><td>${m.email}</td><td>${m.role}</td><td>${m.lastSignInAt?.slice(0, 16).replace('T', ' ') ?? 'never'}</td></tr>`)}
</tbody></table></div>
${invitations.length ? html`<h2>Pending invitations</h2><ul>${invitations.map((i) => html`<li>${i.email} <span class="muted">(until ${i.expiresAt.slice(0, 10)})</span></li>`)}</ul>` : ''}
${
  viewer.role === 'owner'
    ? html`<h2>Invite a member</h2>
<form class="stack" method="post" action="/dashboard/members">${csrfField(viewer.csrfToken)}
  <div><label for="email">E-mail</label><input id="email" name="email" type="email" required></div>
  <div><button type="submit">Create invitation</button></div>
</form>`
    : html`<p class="muted">Only the organization's owner can invite members.</p>`
}`,
  );
}

const send = (reply: FastifyReply, status: number, markup: string) =>
  reply.code(status).type('text/html; charset=utf-8').send(markup);

export function memberPages(scope: WebScope, deps: Deps): void {
  scope.get('/dashboard/members', async (request, reply) => {
    const viewer = viewerOf(request);
    return send(reply, 200, await membersPage(deps, viewer, ''));
  });

  scope.post('/dashboard/members', async (request, reply) => {
    const viewer = viewerOf(request);
    try {
      const invite = await inviteMember(deps, viewer, field(formOf(request), 'email'));
      const link = `${deps.config.publicUrl}/invite/${invite.token}`;
      // No e-mail is sent for invitations: the owner passes the link on.
      const shown = html`<section class="card"><h2>Invitation created</h2>
<p>Send this link to the person you invite; it works once, until ${invite.expiresAt.toISOString().slice(0, 10)}.</p>
<p class="secret">${link}</p></section>`;
      return send(reply, 201, await membersPage(deps, viewer, shown));
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      return send(
        reply,
        err.status,
        await membersPage(deps, viewer, '', { kind: 'error', text: err.message }),
      );
    }
  });
}
