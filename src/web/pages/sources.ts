// Sources: the list, a source's page with its configuration (secrets shown only as the mask)
// and its tools, a connection test, one form for creating and editing, and deletion behind a
// confirmation page.
//
// Secrets (config.env values, authConfig token/apiKey/username/password) are never shown. On
// the edit form, env lines of stored values read `NAME=********` and credential fields are
// empty: sending the mask (or leaving a credential blank) keeps the stored value, as the API's
// PATCH does (docs/api.md, "Secrets"); a credential is removed with its "remove" box.
import type { FastifyReply } from 'fastify';
import type { ConnectorToolkit } from '../../domain/connector/types.ts';
import { offeredToolkits, refreshForView } from '../../domain/connectors.ts';
import type { Deps } from '../../domain/deps.ts';
import { createSource, deleteSource, getSource, listSources, updateSource } from '../../domain/sources.ts';
import type { Viewer } from '../../domain/users.ts';
import { AppError, type ErrorDetail, errors } from '../../lib/errors.ts';
import { testSource } from '../../runner/source-test.ts';
import { CREDENTIAL_KEYS, type CredentialKey, SECRET_MASK } from '../../schemas/bounds.ts';
import {
  AUTH_TYPES,
  MCP_TRANSPORTS,
  SOURCE_TYPES,
  type Source,
  SourceCreateBody,
  type SourceTestResult,
  type SourceType,
  SourceUpdateBody,
  type Tool,
} from '../../schemas/source.ts';
import { type FormBody, field, fields, formOf, viewerOf } from '../auth.ts';
import { type Html, html, raw } from '../html.ts';
import { badge, csrfField, page } from '../layout.ts';
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
  withDetails,
} from '../page-kit.ts';
import type { WebScope } from '../plugin.ts';
import {
  CONNECT_DONE,
  connectButton,
  connectorRows,
  sourceConnectPages,
  toolkitSuggestions,
} from './source-connect.ts';
import { connectionPanel } from './source-oauth.ts';

const section = '/dashboard/sources';

const LABELS: Record<string, string> = {
  name: 'Name',
  description: 'Description',
  type: 'Type',
  config: '',
  transport: 'Transport',
  command: 'Command',
  args: 'Argument',
  url: 'URL',
  baseUrl: 'Base URL',
  openapiUrl: 'OpenAPI document URL',
  env: 'Environment variable',
  authType: 'Authentication',
  authConfig: '',
  headerName: 'Header or parameter name',
  prefix: 'Prefix',
  provider: 'Provider or toolkit',
  token: 'Token',
  apiKey: 'API key',
  username: 'User name',
  password: 'Password',
};

const CREDENTIAL_LABELS: Record<CredentialKey, string> = {
  token: 'Token',
  apiKey: 'API key',
  username: 'User name',
  password: 'Password',
};

const DONE: Record<string, string> = {
  created: 'Source created. Test it to list its tools.',
  saved: 'Source saved.',
  deleted: 'Source deleted.',
  ...CONNECT_DONE,
  'signed-in': 'Source connected: its sign-in is stored and runs use it.',
};

interface SourceValues {
  name: string;
  description: string;
  type: string;
  transport: string;
  command: string;
  args: string;
  url: string;
  baseUrl: string;
  openapiUrl: string;
  env: string;
  authType: string;
  headerName: string;
  prefix: string;
  provider: string;
  credentials: Record<CredentialKey, string>;
  /** Stored credentials to remove. */
  clear: string[];
}

const noCredentials = (): Record<CredentialKey, string> => ({
  token: '',
  apiKey: '',
  username: '',
  password: '',
});

function valuesOfSource(s: Source): SourceValues {
  const c = s.config;
  return {
    name: s.name,
    description: s.description ?? '',
    type: s.type,
    transport: c.transport ?? '',
    command: c.command ?? '',
    args: (c.args ?? []).join('\n'),
    url: c.url ?? '',
    baseUrl: c.baseUrl ?? '',
    openapiUrl: c.openapiUrl ?? '',
    // The stored values are never read: each name is shown with the mask, which keeps it.
    env: Object.keys(c.env ?? {})
      .map((name) => `${name}=${SECRET_MASK}`)
      .join('\n'),
    authType: s.authType ?? '',
    headerName: s.authConfig?.headerName ?? '',
    prefix: s.authConfig?.prefix ?? '',
    provider: s.authConfig?.provider ?? '',
    credentials: noCredentials(),
    clear: [],
  };
}

function valuesOfForm(form: FormBody, type: string): SourceValues {
  const credentials = noCredentials();
  // Credentials are taken as typed (not trimmed): a secret may end with a space.
  for (const key of CREDENTIAL_KEYS) {
    const v = form[key];
    credentials[key] = (Array.isArray(v) ? v[0] : v) ?? '';
  }
  return {
    name: field(form, 'name'),
    description: field(form, 'description'),
    type,
    transport: field(form, 'transport'),
    command: field(form, 'command'),
    args: field(form, 'args'),
    url: field(form, 'url'),
    baseUrl: field(form, 'baseUrl'),
    openapiUrl: field(form, 'openapiUrl'),
    env: field(form, 'env'),
    authType: field(form, 'authType'),
    headerName: field(form, 'headerName'),
    prefix: field(form, 'prefix'),
    provider: field(form, 'provider'),
    credentials,
    clear: fields(form, 'clear'),
  };
}

const lines = (text: string) =>
  text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter(Boolean);

/** `NAME=value` lines; the value is everything after the first `=`. */
function envOf(text: string, details: ErrorDetail[]): Record<string, string> {
  const env = new Map<string, string>();
  for (const [i, line] of text.split(/\r?\n/).entries()) {
    if (!line.trim()) continue;
    const eq = line.indexOf('=');
    const name = (eq < 0 ? line : line.slice(0, eq)).trim();
    if (eq < 0) {
      details.push({ path: '/body/config/env', message: `line ${i + 1} is not NAME=value` });
    } else if (env.has(name)) {
      details.push({ path: `/body/config/env/${name}`, message: `is given twice (line ${i + 1})` });
    } else env.set(name, line.slice(eq + 1).replace(/\s+$/, ''));
  }
  // fromEntries makes own properties, whatever the name (even `__proto__`).
  return Object.fromEntries(env);
}

/** The config of a source of this type from the form; fields of other types are left out. */
function configOf(type: string, v: SourceValues, details: ErrorDetail[]): Record<string, unknown> {
  const config: Record<string, unknown> = {};
  if (type === 'mcp') {
    if (v.transport) config.transport = v.transport;
    if (v.command) config.command = v.command;
    const args = lines(v.args);
    if (args.length > 0) config.args = args;
    if (v.url) config.url = v.url;
    const env = envOf(v.env, details);
    if (Object.keys(env).length > 0) config.env = env;
  } else if (type === 'api') {
    if (v.baseUrl) config.baseUrl = v.baseUrl;
    if (v.openapiUrl) config.openapiUrl = v.openapiUrl;
  }
  return config;
}

/**
 * authConfig from the form: a typed credential replaces the stored one; a blank one (or the
 * mask) keeps it unless "remove" is ticked. Undefined when there is nothing to send.
 */
function authConfigOf(v: SourceValues, stored?: Source['authConfig']): Record<string, string> | undefined {
  const auth: Record<string, string> = {};
  if (v.headerName) auth.headerName = v.headerName;
  if (v.prefix) auth.prefix = v.prefix;
  if (v.provider) auth.provider = v.provider;
  // Set through the API; the form keeps them as stored.
  for (const key of ['authorizationUrl', 'tokenUrl', 'scope'] as const) {
    const value = stored?.[key];
    if (value) auth[key] = value;
  }
  for (const key of CREDENTIAL_KEYS) {
    const typed = v.credentials[key];
    const isStored = stored?.[key] === SECRET_MASK;
    if (typed && typed !== SECRET_MASK) auth[key] = typed;
    else if (isStored && !v.clear.includes(key)) auth[key] = SECRET_MASK;
    // The mask typed where nothing is stored is sent as is: the domain refuses it (400).
    else if (typed === SECRET_MASK && !isStored) auth[key] = SECRET_MASK;
  }
  return Object.keys(auth).length > 0 ? auth : undefined;
}

function createBodyOf(v: SourceValues, organizationId: string, details: ErrorDetail[]) {
  const authConfig = authConfigOf(v);
  return {
    organizationId,
    name: v.name,
    type: v.type,
    config: configOf(v.type, v, details),
    ...(v.description && { description: v.description }),
    ...(v.authType && { authType: v.authType }),
    ...(authConfig && { authConfig }),
  };
}

function patchOf(v: SourceValues, source: Source, details: ErrorDetail[]) {
  return {
    name: v.name,
    description: v.description || null,
    config: configOf(source.type, v, details),
    authType: v.authType || null,
    authConfig: authConfigOf(v, source.authConfig) ?? null,
  };
}

/** Schema problems and form problems (env lines) together, or undefined. */
function problemsOf(
  schema: typeof SourceCreateBody | typeof SourceUpdateBody,
  body: unknown,
  details: ErrorDetail[],
) {
  const schemaErr = schemaProblems(schema, body);
  if (schemaErr) return withDetails(schemaErr, details);
  if (details.length > 0) return errors.validation(`${details[0]?.path} ${details[0]?.message}`, details);
  return undefined;
}

const options = (values: readonly string[], chosen: string, empty?: string) =>
  html`${empty !== undefined ? html`<option value="" ${chosen === '' ? raw('selected') : ''}>${empty}</option>` : ''}${values.map(
    (t) => html`<option value="${t}" ${chosen === t ? raw('selected') : ''}>${t}</option>`,
  )}`;

function formPage(
  deps: Deps,
  viewer: Viewer,
  o: { source?: Source; values: SourceValues; error?: AppError; toolkits?: readonly ConnectorToolkit[] },
): string {
  const { source, values: v, error: err } = o;
  const title = source ? `Edit ${source.name}` : 'New source';
  const type = source?.type;
  const shows = (t: SourceType) => type === undefined || type === t;
  const inv = (path: string) => invalid(err, path);
  const stdio = deps.config.stdioCommands;
  const stored = (key: CredentialKey) => source?.authConfig?.[key] === SECRET_MASK;
  return page(
    { title, viewer, section },
    html`<h1>${title}</h1>
${problemsFlash(err, LABELS)}
<form class="stack" method="post" action="${source ? `${section}/${source.id}` : section}">${csrfField(viewer.csrfToken)}
  <div><label for="name">Name</label><input id="name" name="name" required maxlength="255" value="${v.name}" ${inv('name')}></div>
  <div><label for="description">Description</label><input id="description" name="description" maxlength="2000" value="${v.description}" ${inv('description')}></div>
  ${
    source
      ? html`<p><strong>Type:</strong> ${source.type} <span class="muted">(set at creation)</span></p>`
      : html`<div><label for="type">Type</label><select id="type" name="type" ${inv('type')}>${options(SOURCE_TYPES, v.type)}</select>
    <p class="muted">mcp: an MCP server (stdio, http or websocket); api: an HTTP API, with its OpenAPI document if it has one; local: tools built into the service (current_time, fetch_url).</p></div>`
  }
  ${
    shows('mcp')
      ? html`<fieldset><legend>MCP server${type ? '' : ' (type mcp)'}</legend>
    <div><label for="transport">Transport</label><select id="transport" name="transport" ${inv('config/transport')}>${options(MCP_TRANSPORTS, v.transport, 'infer (stdio with a command, http with a URL)')}</select></div>
    <div><label for="command">Command (stdio)</label><input id="command" name="command" spellcheck="false" value="${v.command}" ${inv('config/command')} aria-describedby="command-help">
      <p class="muted" id="command-help">${stdio.length ? `Allowed commands: ${stdio.join(', ')}.` : 'This service runs no stdio command (SVC_STDIO_COMMANDS is empty).'}</p></div>
    <div><label for="args">Arguments (stdio, one per line)</label><textarea id="args" name="args" rows="3" spellcheck="false" ${inv('config/args')}>${v.args}</textarea></div>
    <div><label for="url">URL (http or websocket)</label><input id="url" name="url" type="url" spellcheck="false" value="${v.url}" ${inv('config/url')}></div>
    <div><label for="env">Environment (stdio): NAME=value, one per line</label><textarea id="env" name="env" rows="3" spellcheck="false" autocomplete="off" ${inv('config/env')} aria-describedby="env-help">${v.env}</textarea>
      <p class="muted" id="env-help">Only the names the operator allows for the command: ${stdio.length ? stdio.map((c) => `${c}: ${[...(deps.config.stdioEnv.get(c) ?? [])].join(', ') || 'none'}`).join('; ') : 'none'}. Values are secret and never shown again: ${SECRET_MASK} keeps a stored value; a line removed removes the variable.</p></div>
  </fieldset>`
      : ''
  }
  ${
    shows('api')
      ? html`<fieldset><legend>HTTP API${type ? '' : ' (type api)'}</legend>
    <div><label for="baseUrl">Base URL</label><input id="baseUrl" name="baseUrl" type="url" spellcheck="false" value="${v.baseUrl}" ${inv('config/baseUrl')}></div>
    <div><label for="openapiUrl">OpenAPI document URL (optional; default: base URL + /openapi.json)</label><input id="openapiUrl" name="openapiUrl" type="url" spellcheck="false" value="${v.openapiUrl}" ${inv('config/openapiUrl')}></div>
  </fieldset>`
      : ''
  }
  ${
    type === 'local'
      ? html`<p class="muted">A local source needs no configuration.</p>`
      : html`<fieldset><legend>Authentication (mcp over http or websocket, api)</legend>
    <div><label for="authType">Method</label><select id="authType" name="authType" ${inv('authType')}>${options(AUTH_TYPES, v.authType, 'not set')}</select></div>
    <div><label for="headerName">Header name (query: parameter name)</label><input id="headerName" name="headerName" maxlength="200" value="${v.headerName}" ${inv('authConfig/headerName')}></div>
    <div><label for="prefix">Prefix (bearer: default Bearer)</label><input id="prefix" name="prefix" maxlength="100" value="${v.prefix}" ${inv('authConfig/prefix')}></div>
    <div><label for="provider">Provider or toolkit (connector: the toolkit, for example github; oauth: a client the operator registered)</label><input id="provider" name="provider" maxlength="100" spellcheck="false" value="${v.provider}" ${o.toolkits?.length ? raw('list="toolkits"') : ''} ${inv('authConfig/provider')}>${toolkitSuggestions(o.toolkits ?? [])}</div>
    ${CREDENTIAL_KEYS.map(
      (key) => html`<div><label for="${key}">${CREDENTIAL_LABELS[key]}</label>
      <input id="${key}" name="${key}" type="password" autocomplete="new-password" spellcheck="false" value="${v.credentials[key]}" ${stored(key) ? raw('placeholder="stored: leave blank to keep"') : ''} ${inv(`authConfig/${key}`)}>
      ${stored(key) ? html`<label class="choice"><input type="checkbox" name="clear" value="${key}" ${v.clear.includes(key) ? raw('checked') : ''}> Remove the stored ${CREDENTIAL_LABELS[key].toLowerCase()}</label>` : ''}</div>`,
    )}
  </fieldset>`
  }
  <div class="row"><button type="submit">${source ? 'Save source' : 'Create source'}</button>
    <a class="button secondary" href="${source ? `${section}/${source.id}` : section}">Cancel</a></div>
</form>`,
  );
}

function toolsTable(tools: Tool[]): Html {
  if (tools.length === 0)
    return html`<p class="muted">No tools known yet: test the connection to list them.</p>`;
  return html`<div class="table-wrap"><table><thead><tr><th scope="col">Tool</th><th scope="col">Description</th></tr></thead>
<tbody>${tools.map((t) => html`<tr><td><code>${t.name ?? ''}</code></td><td>${t.description ?? ''}</td></tr>`)}</tbody></table></div>`;
}

function sourcePage(
  viewer: Viewer,
  source: Source,
  o: { flash?: Flash; test?: SourceTestResult; connection?: Html | undefined } = {},
): string {
  const c = source.config;
  const credentials = CREDENTIAL_KEYS.filter((k) => source.authConfig?.[k] === SECRET_MASK);
  const row = (label: string, value: Html | string | undefined) =>
    value ? html`<tr><th scope="row">${label}</th><td>${value}</td></tr>` : '';
  const test = o.test;
  const flash: Flash = test ? { kind: test.success ? 'ok' : 'error', text: test.message ?? '' } : o.flash;
  const tools = test?.success ? (test.tools ?? []) : (source.tools ?? []);
  return page(
    { title: source.name, viewer, section, flash },
    html`<h1>${source.name} ${badge(source.isActive ? 'active' : 'inactive')}</h1>
<div class="row spaced">
  ${connectButton(viewer, source)}
  <form method="post" action="${section}/${source.id}/test" class="inline">${csrfField(viewer.csrfToken)}<button type="submit">Test connection</button></form>
  <a class="button secondary" href="${section}/${source.id}/edit">Edit</a>
  <a class="button secondary" href="${section}/${source.id}/delete">Delete</a>
</div>
<div class="table-wrap"><table><tbody>
  ${row('Type', source.type)}
  ${row('Slug', html`<code>${source.slug ?? ''}</code>`)}
  ${row('Description', source.description)}
  ${row('Transport', c.transport)}
  ${row('Command', c.command ? html`<code>${c.command}</code>` : undefined)}
  ${row('Arguments', c.args?.length ? html`${c.args.map((a, i) => html`${i ? ' ' : ''}<code>${a}</code>`)}` : undefined)}
  ${row('URL', c.url)}
  ${row('Base URL', c.baseUrl)}
  ${row('OpenAPI document', c.openapiUrl)}
  ${row('Environment', c.env && Object.keys(c.env).length ? html`${Object.keys(c.env).map((n, i) => html`${i ? ', ' : ''}<code>${n}=${SECRET_MASK}</code>`)}` : undefined)}
  ${row('Authentication', source.authType)}
  ${connectorRows(source)}
  ${row('Header or parameter', source.authConfig?.headerName)}
  ${row('Prefix', source.authConfig?.prefix)}
  ${row('Stored credentials', credentials.length ? credentials.map((k) => CREDENTIAL_LABELS[k]).join(', ') : undefined)}
  <tr><th scope="row">Last connected</th><td>${source.lastConnectedAt ? when(source.lastConnectedAt) : html`<span class="muted">never</span>`}</td></tr>
</tbody></table></div>
${o.connection ?? ''}
<h2>Tools</h2>
${test && !test.success && tools.length ? html`<p class="muted">The test failed; these are the tools found by the last successful test.</p>` : ''}
${toolsTable(tools)}`,
  );
}

async function listPage(deps: Deps, viewer: Viewer, flash: Flash): Promise<string> {
  const sources = await listSources(deps, viewer.organizationId);
  return page(
    { title: 'Sources', viewer, section, flash },
    html`<div class="row ends"><h1>Sources</h1><a class="button" href="${section}/new">New source</a></div>
<p class="muted">Sources give a task's model tools: MCP servers, HTTP APIs, or the service's own.</p>
${
  sources.length === 0
    ? html`<p>No sources yet. <a href="${section}/new">Create one</a>.</p>`
    : html`<div class="table-wrap"><table>
<thead><tr><th scope="col">Name</th><th scope="col">Type</th><th scope="col">State</th><th scope="col">Tools</th><th scope="col">Last connected</th></tr></thead>
<tbody>${sources.map(
        (s) => html`<tr><td><a href="${section}/${s.id}">${s.name}</a></td><td>${s.type}</td>
<td>${badge(s.isActive ? 'active' : 'inactive')}</td><td>${(s.tools ?? []).length}</td>
<td>${s.lastConnectedAt ? when(s.lastConnectedAt) : html`<span class="muted">never</span>`}</td></tr>`,
      )}</tbody></table></div>`
}`,
  );
}

type IdParams = { Params: { id: string } };

export function sourcePages(scope: WebScope, deps: Deps): void {
  const missing = (reply: FastifyReply, viewer: Viewer) =>
    notFoundPage(reply, viewer, section, 'Source', { href: section, label: 'Back to sources' });
  const sourceOf = (viewer: Viewer, id: string) =>
    isUuid(id) ? found(() => getSource(deps, viewer.organizationId, id)) : Promise.resolve(undefined);

  scope.get(section, async (request, reply) => {
    const viewer = viewerOf(request);
    return sendHtml(reply, 200, await listPage(deps, viewer, doneFlash(request.query, DONE)));
  });

  scope.get(`${section}/new`, async (request, reply) => {
    const viewer = viewerOf(request);
    const values = valuesOfForm({}, 'mcp');
    return sendHtml(reply, 200, formPage(deps, viewer, { values, toolkits: await offeredToolkits(deps) }));
  });

  scope.post(section, async (request, reply) => {
    const viewer = viewerOf(request);
    const form = formOf(request);
    const values = valuesOfForm(form, field(form, 'type'));
    const details: ErrorDetail[] = [];
    const body = createBodyOf(values, viewer.organizationId, details);
    try {
      const problems = problemsOf(SourceCreateBody, body, details);
      if (problems) throw problems;
      const source = await createSource(deps, viewer.organizationId, body as SourceCreateBody);
      return reply.redirect(`${section}/${source.id}?done=created`, 303);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      return sendHtml(reply, err.status, formPage(deps, viewer, { values, error: err }));
    }
  });

  scope.get<IdParams>(`${section}/:id`, async (request, reply) => {
    const viewer = viewerOf(request);
    if (isUuid(request.params.id)) await refreshForView(deps, viewer.organizationId, request.params.id);
    const source = await sourceOf(viewer, request.params.id);
    if (!source) return missing(reply, viewer);
    const flash = doneFlash(request.query, DONE);
    const connection = await connectionPanel(deps, viewer, source);
    return sendHtml(reply, 200, sourcePage(viewer, source, { flash, connection }));
  });

  scope.get<IdParams>(`${section}/:id/edit`, async (request, reply) => {
    const viewer = viewerOf(request);
    const source = await sourceOf(viewer, request.params.id);
    if (!source) return missing(reply, viewer);
    const toolkits = await offeredToolkits(deps);
    return sendHtml(reply, 200, formPage(deps, viewer, { source, values: valuesOfSource(source), toolkits }));
  });

  scope.post<IdParams>(`${section}/:id`, async (request, reply) => {
    const viewer = viewerOf(request);
    const source = await sourceOf(viewer, request.params.id);
    if (!source) return missing(reply, viewer);
    const values = valuesOfForm(formOf(request), source.type);
    const details: ErrorDetail[] = [];
    const patch = patchOf(values, source, details);
    try {
      const problems = problemsOf(SourceUpdateBody, patch, details);
      if (problems) throw problems;
      await updateSource(deps, viewer.organizationId, source.id, patch as SourceUpdateBody);
      return reply.redirect(`${section}/${source.id}?done=saved`, 303);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      if (err.code === 'not_found') return missing(reply, viewer);
      return sendHtml(reply, err.status, formPage(deps, viewer, { source, values, error: err }));
    }
  });

  // The test connects for real (up to 15 s) and shows its outcome on the source's page.
  scope.post<IdParams>(`${section}/:id/test`, async (request, reply) => {
    const viewer = viewerOf(request);
    const id = request.params.id;
    if (!isUuid(id)) return missing(reply, viewer);
    const test = await found(() => testSource(deps, viewer.organizationId, id));
    const source = test && (await sourceOf(viewer, id));
    if (!test || !source) return missing(reply, viewer);
    const connection = await connectionPanel(deps, viewer, source);
    return sendHtml(reply, 200, sourcePage(viewer, source, { test, connection }));
  });

  sourceConnectPages(scope, deps, {
    section,
    missing,
    show: async (reply, viewer, id, status, flash) => {
      const source = await sourceOf(viewer, id);
      if (!source) return missing(reply, viewer);
      const connection = await connectionPanel(deps, viewer, source);
      return sendHtml(reply, status, sourcePage(viewer, source, { flash, connection }));
    },
  });

  deleteRoutes(scope, {
    section,
    noun: 'source',
    load: sourceOf,
    remove: (viewer, id) => deleteSource(deps, viewer.organizationId, id),
    consequence: (source) =>
      html`The source <strong>${source.name}</strong> and its stored secrets will be deleted, and it will be removed from every task that has it.`,
    missing,
  });
}
