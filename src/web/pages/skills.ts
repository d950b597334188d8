// Skills: the list, a skill's page (its content rendered), one form for creating and editing,
// and deletion behind a confirmation page.
import type { FastifyReply } from 'fastify';
import type { Deps } from '../../domain/deps.ts';
import { createSkill, deleteSkill, getSkill, listSkills, updateSkill } from '../../domain/skills.ts';
import type { Viewer } from '../../domain/users.ts';
import { AppError } from '../../lib/errors.ts';
import { type Skill, SkillCreateBody, SkillUpdateBody } from '../../schemas/skill.ts';
import { type FormBody, field, formOf, viewerOf } from '../auth.ts';
import { html } from '../html.ts';
import { csrfField, page } from '../layout.ts';
import { renderMarkdown } from '../markdown.ts';
import {
  deleteRoutes,
  doneFlash,
  type Flash,
  found,
  invalid,
  isUuid,
  notFoundPage,
  problemsFlash,
  schemaProblems,
  sendHtml,
  when,
} from '../page-kit.ts';
import type { WebScope } from '../plugin.ts';

const section = '/dashboard/skills';

const LABELS: Record<string, string> = {
  name: 'Name',
  description: 'Description',
  category: 'Category',
  content: 'Content',
  frontmatter: '',
  requiredSources: 'Required source',
};

const DONE: Record<string, string> = {
  created: 'Skill created.',
  saved: 'Skill saved.',
  deleted: 'Skill deleted.',
};

interface SkillValues {
  name: string;
  description: string;
  category: string;
  content: string;
  requiredSources: string;
}

const valuesOfSkill = (s: Skill): SkillValues => ({
  name: s.name,
  description: s.description ?? '',
  category: s.category ?? '',
  content: s.content,
  requiredSources: (s.frontmatter?.requiredSources ?? []).join(', '),
});

const valuesOfForm = (form: FormBody): SkillValues => ({
  name: field(form, 'name'),
  description: field(form, 'description'),
  category: field(form, 'category'),
  content: field(form, 'content'),
  requiredSources: field(form, 'requiredSources'),
});

const slugList = (text: string) => text.split(/[\s,]+/).filter(Boolean);

function createBodyOf(v: SkillValues, organizationId: string): Record<string, unknown> {
  const required = slugList(v.requiredSources);
  return {
    organizationId,
    name: v.name,
    content: v.content,
    ...(v.category && { category: v.category }),
    ...(v.description && { description: v.description }),
    ...(required.length > 0 && { frontmatter: { requiredSources: required } }),
  };
}

/** The whole form as a PATCH; the frontmatter keys the form does not show (author, tags) are kept. */
function patchOf(v: SkillValues, skill: Skill): Record<string, unknown> {
  const { requiredSources: _, ...rest } = skill.frontmatter ?? {};
  const required = slugList(v.requiredSources);
  const frontmatter = { ...rest, ...(required.length > 0 && { requiredSources: required }) };
  return {
    name: v.name,
    content: v.content,
    category: v.category || null,
    description: v.description || null,
    frontmatter: Object.keys(frontmatter).length > 0 ? frontmatter : null,
  };
}

function formPage(viewer: Viewer, o: { skill?: Skill; values: SkillValues; error?: AppError }): string {
  const { skill, values: v, error: err } = o;
  const title = skill ? `Edit ${skill.name}` : 'New skill';
  return page(
    { title, viewer, section },
    html`<h1>${title}</h1>
${problemsFlash(err, LABELS)}
<form class="stack" method="post" action="${skill ? `${section}/${skill.id}` : section}">${csrfField(viewer.csrfToken)}
  <div><label for="name">Name</label><input id="name" name="name" required maxlength="255" value="${v.name}" ${invalid(err, 'name')}></div>
  <div><label for="description">Description</label><input id="description" name="description" maxlength="2000" value="${v.description}" ${invalid(err, 'description')}></div>
  <div><label for="category">Category</label><input id="category" name="category" maxlength="100" value="${v.category}" ${invalid(err, 'category')}></div>
  <div><label for="content">Content (Markdown instructions, sent to the model before the prompt)</label>
    <textarea id="content" name="content" required rows="14" ${invalid(err, 'content')}>${v.content}</textarea></div>
  <div><label for="requiredSources">Required sources</label>
    <input id="requiredSources" name="requiredSources" value="${v.requiredSources}" aria-describedby="requiredSources-help" ${invalid(err, 'frontmatter')}>
    <p class="muted" id="requiredSources-help">Source slugs, separated by commas. A run of a task with this skill fails unless each is attached to the task.</p></div>
  <div class="row"><button type="submit">${skill ? 'Save skill' : 'Create skill'}</button>
    <a class="button secondary" href="${skill ? `${section}/${skill.id}` : section}">Cancel</a></div>
</form>`,
  );
}

function skillPage(viewer: Viewer, skill: Skill, flash: Flash): string {
  const required = skill.frontmatter?.requiredSources ?? [];
  return page(
    { title: skill.name, viewer, section, flash },
    html`<h1>${skill.name}</h1>
<div class="row spaced">
  <a class="button secondary" href="${section}/${skill.id}/edit">Edit</a>
  <a class="button secondary" href="${section}/${skill.id}/delete">Delete</a>
</div>
<div class="table-wrap"><table><tbody>
  <tr><th scope="row">Slug</th><td><code>${skill.slug ?? ''}</code></td></tr>
  <tr><th scope="row">Version</th><td>${skill.version ?? 1}</td></tr>
  <tr><th scope="row">Category</th><td>${skill.category ?? html`<span class="muted">none</span>`}</td></tr>
  <tr><th scope="row">Description</th><td>${skill.description ?? html`<span class="muted">none</span>`}</td></tr>
  <tr><th scope="row">Required sources</th><td>${required.length ? required.map((s, i) => html`${i ? ', ' : ''}<code>${s}</code>`) : html`<span class="muted">none</span>`}</td></tr>
  <tr><th scope="row">Updated</th><td>${when(skill.updatedAt)}</td></tr>
</tbody></table></div>
<h2>Content</h2>
<div class="output">${renderMarkdown(skill.content)}</div>`,
  );
}

async function listPage(deps: Deps, viewer: Viewer, flash: Flash): Promise<string> {
  const skills = await listSkills(deps, viewer.organizationId);
  return page(
    { title: 'Skills', viewer, section, flash },
    html`<div class="row ends"><h1>Skills</h1><a class="button" href="${section}/new">New skill</a></div>
<p class="muted">Skills are instructions given to the model before a task's prompt.</p>
${
  skills.length === 0
    ? html`<p>No skills yet. <a href="${section}/new">Create one</a>.</p>`
    : html`<div class="table-wrap"><table>
<thead><tr><th scope="col">Name</th><th scope="col">Slug</th><th scope="col">Category</th><th scope="col">Version</th><th scope="col">Updated</th></tr></thead>
<tbody>${skills.map(
        (
          s,
        ) => html`<tr><td><a href="${section}/${s.id}">${s.name}</a>${s.description ? html`<div class="muted">${s.description}</div>` : ''}</td>
<td><code>${s.slug ?? ''}</code></td><td>${s.category ?? ''}</td><td>${s.version ?? 1}</td><td>${when(s.updatedAt)}</td></tr>`,
      )}</tbody></table></div>`
}`,
  );
}

type IdParams = { Params: { id: string } };

export function skillPages(scope: WebScope, deps: Deps): void {
  const missing = (reply: FastifyReply, viewer: Viewer) =>
    notFoundPage(reply, viewer, section, 'Skill', { href: section, label: 'Back to skills' });
  const skillOf = (viewer: Viewer, id: string) =>
    isUuid(id) ? found(() => getSkill(deps, viewer.organizationId, id)) : Promise.resolve(undefined);

  scope.get(section, async (request, reply) => {
    const viewer = viewerOf(request);
    return sendHtml(reply, 200, await listPage(deps, viewer, doneFlash(request.query, DONE)));
  });

  scope.get(`${section}/new`, async (request, reply) => {
    const viewer = viewerOf(request);
    const values = { name: '', description: '', category: '', content: '', requiredSources: '' };
    return sendHtml(reply, 200, formPage(viewer, { values }));
  });

  scope.post(section, async (request, reply) => {
    const viewer = viewerOf(request);
    const values = valuesOfForm(formOf(request));
    const body = createBodyOf(values, viewer.organizationId);
    try {
      const problems = schemaProblems(SkillCreateBody, body);
      if (problems) throw problems;
      const skill = await createSkill(deps, viewer.organizationId, body as SkillCreateBody);
      return reply.redirect(`${section}/${skill.id}?done=created`, 303);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      return sendHtml(reply, err.status, formPage(viewer, { values, error: err }));
    }
  });

  scope.get<IdParams>(`${section}/:id`, async (request, reply) => {
    const viewer = viewerOf(request);
    const skill = await skillOf(viewer, request.params.id);
    if (!skill) return missing(reply, viewer);
    return sendHtml(reply, 200, skillPage(viewer, skill, doneFlash(request.query, DONE)));
  });

  scope.get<IdParams>(`${section}/:id/edit`, async (request, reply) => {
    const viewer = viewerOf(request);
    const skill = await skillOf(viewer, request.params.id);
    if (!skill) return missing(reply, viewer);
    return sendHtml(reply, 200, formPage(viewer, { skill, values: valuesOfSkill(skill) }));
  });

  scope.post<IdParams>(`${section}/:id`, async (request, reply) => {
    const viewer = viewerOf(request);
    const skill = await skillOf(viewer, request.params.id);
    if (!skill) return missing(reply, viewer);
    const values = valuesOfForm(formOf(request));
    const patch = patchOf(values, skill);
    try {
      const problems = schemaProblems(SkillUpdateBody, patch);
      if (problems) throw problems;
      await updateSkill(deps, viewer.organizationId, skill.id, patch as SkillUpdateBody);
      return reply.redirect(`${section}/${skill.id}?done=saved`, 303);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      if (err.code === 'not_found') return missing(reply, viewer);
      return sendHtml(reply, err.status, formPage(viewer, { skill, values, error: err }));
    }
  });

  deleteRoutes(scope, {
    section,
    noun: 'skill',
    load: skillOf,
    remove: (viewer, id) => deleteSkill(deps, viewer.organizationId, id),
    consequence: (skill) =>
      html`The skill <strong>${skill.name}</strong> will be deleted and removed from every task that has it.`,
    missing,
  });
}
