import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { assertValidation } from './helpers/assertions.ts';
import { resourceCalls, useTestService } from './helpers/fixtures.ts';
import type { Reply } from './helpers/service.ts';

/** What the case sends, the body fields it sets (undefined leaves a field out), the path it must name. */
type Case = [what: string, fields: Record<string, unknown>, path: string];

const MASK = '********';
const long = (n: number) => 'x'.repeat(n);
const SOME_UUID = '00000000-0000-4000-8000-000000000000';
const email = { type: 'email', value: 'a@example.com' };
const destination = (d: Record<string, unknown>) => ({ destinations: [d] });
const D0 = '/body/destinations/0';
const FM = '/body/frontmatter';

/** A create that leaves out each of these required fields. */
const missing = (...fields: string[]): Case[] =>
  fields.map((field) => [`no ${field}`, { [field]: undefined }, `/body/${field}`]);
const ORGANIZATION_ID_ON_CREATE: Case[] = [
  ['no organizationId', { organizationId: undefined }, '/body/organizationId'],
  ['an organizationId that is not a uuid', { organizationId: 'acme' }, '/body/organizationId'],
  ['an organizationId that is a number', { organizationId: 42 }, '/body/organizationId'],
];
const ORGANIZATION_ID_ON_UPDATE: Case = [
  'an organizationId, which cannot change',
  { organizationId: SOME_UUID },
  '/body/organizationId',
];

/**
 * A 400 `validation_error` naming `path`, whose message repeats the first detail (as the API
 * documentation says every validation message does).
 */
function assertRefused(res: Reply, path: string) {
  assertValidation(res, path);
  const first = res.body.error.details[0].path;
  assert.ok(res.body.error.message.startsWith(first), `message names ${first}: ${res.body.error.message}`);
}

// Task fields: the same rules on create and on update.
const TASK_FIELDS: Case[] = [
  ['an empty name', { name: '' }, '/body/name'],
  ['a name of 256 characters', { name: long(256) }, '/body/name'],
  ['a name that is a number', { name: 42 }, '/body/name'],
  ['a null name', { name: null }, '/body/name'],
  ['an empty prompt', { prompt: '' }, '/body/prompt'],
  ['a prompt above 100000 characters', { prompt: long(100_001) }, '/body/prompt'],
  ['a prompt that is an array', { prompt: ['Summarise'] }, '/body/prompt'],
  ['a model that is not in the catalog', { model: 'acme/no-such-model' }, '/body/model'],
  ['an empty model', { model: '' }, '/body/model'],
  ['a model that is a number', { model: 7 }, '/body/model'],
  ['an unknown schedule', { schedule: 'monthly' }, '/body/schedule'],
  ['a schedule in capitals', { schedule: 'DAILY' }, '/body/schedule'],
  ['a scheduleTime of 24:00', { scheduleTime: '24:00' }, '/body/scheduleTime'],
  ['a scheduleTime of 12:60', { scheduleTime: '12:60' }, '/body/scheduleTime'],
  ['a scheduleTime without its leading zero', { scheduleTime: '7:30' }, '/body/scheduleTime'],
  ['a scheduleTime without a colon', { scheduleTime: '0730' }, '/body/scheduleTime'],
  ['a scheduleTime that is a number', { scheduleTime: 730 }, '/body/scheduleTime'],
  ['an unknown weekday', { scheduleDays: ['funday'] }, '/body/scheduleDays/0'],
  ['scheduleDays that are not an array', { scheduleDays: 'monday' }, '/body/scheduleDays'],
  ['a weekday given twice', { scheduleDays: ['monday', 'monday'] }, '/body/scheduleDays'],
  ['a timezone that is not an IANA zone', { timezone: 'Mars/Olympus' }, '/body/timezone'],
  ['a timezone given as an offset', { timezone: '+02:00' }, '/body/timezone'],
  ['an empty timezone', { timezone: '' }, '/body/timezone'],
  ['a timezone that is a number', { timezone: 3 }, '/body/timezone'],
  ['a cron minute of 61', { cronExpression: '61 * * * *' }, '/body/cronExpression'],
  ['a cron expression with 6 fields', { cronExpression: '0 0 * * * *' }, '/body/cronExpression'],
  ['a cron expression of words', { cronExpression: 'every day at nine' }, '/body/cronExpression'],
  ['a cron expression that never matches', { cronExpression: '0 0 31 2 *' }, '/body/cronExpression'],
  ['a cron expression that is a number', { cronExpression: 5 }, '/body/cronExpression'],
  ['an e-mail address without a domain', { deliveryEmailAddress: 'ops' }, '/body/deliveryEmailAddress'],
  ['deliveryEmail as a string', { deliveryEmail: 'yes' }, '/body/deliveryEmail'],
  ['deliveryEmail without an address', { deliveryEmail: true }, '/body/deliveryEmailAddress'],
  ['deliverySms without a phone number', { deliverySms: true }, '/body/deliveryPhoneNumber'],
  ['a phone number that is not E.164', { deliveryPhoneNumber: '0800 123' }, '/body/deliveryPhoneNumber'],
  ['an unknown destination type', destination({ type: 'pigeon', value: 'x' }), `${D0}/type`],
  ['a destination without a value', destination({ type: 'email' }), `${D0}/value`],
  ['an email destination without a domain', destination({ type: 'email', value: 'ops' }), `${D0}/value`],
  ['an ftp webhook destination', destination({ type: 'webhook', value: 'ftp://x.io' }), `${D0}/value`],
  ['an sms destination that is not E.164', destination({ type: 'sms', value: '12345' }), `${D0}/value`],
  ['a destination label of 256 characters', destination({ ...email, label: long(256) }), `${D0}/label`],
  ['a destination with an unknown field', destination({ ...email, id: 'mine' }), `${D0}/id`],
  ['21 destinations', { destinations: Array.from({ length: 21 }, () => email) }, '/body/destinations'],
  ['a skill id that is not a uuid', { skillIds: ['not-a-uuid'] }, '/body/skillIds/0'],
  ['skillIds that are not an array', { skillIds: 'all' }, '/body/skillIds'],
  ['a source id that is not a uuid', { sourceIds: ['not-a-uuid'] }, '/body/sourceIds/0'],
  ['an unknown field', { colour: 'red' }, '/body/colour'],
];

const TASK_CREATE_ONLY: Case[] = [
  ...missing('name', 'prompt'),
  ...ORGANIZATION_ID_ON_CREATE,
  ['a status, which only an update sets', { status: 'paused' }, '/body/status'],
];

const TASK_UPDATE_ONLY: Case[] = [
  ['an unknown status', { status: 'archived' }, '/body/status'],
  ['a status in capitals', { status: 'ACTIVE' }, '/body/status'],
  ['a status that is a number', { status: 1 }, '/body/status'],
  ORGANIZATION_ID_ON_UPDATE,
];

// Destinations managed on their own: POST adds, PATCH changes one (merged with its stored type and value).
const DESTINATION_ADD: Case[] = [
  ['no type', { type: undefined }, '/body/type'],
  ['an unknown type', { type: 'pigeon' }, '/body/type'],
  ['no value', { value: undefined }, '/body/value'],
  ['an empty value', { value: '' }, '/body/value'],
  ['an email value that is not an address', { value: 'nope' }, '/body/value'],
  ['an sms value that is not E.164', { type: 'sms', value: '12345' }, '/body/value'],
  ['a webhook value that is not http', { type: 'webhook', value: 'javascript:alert(1)' }, '/body/value'],
  ['a label of 256 characters', { label: long(256) }, '/body/label'],
  ['an unknown field', { id: 'mine' }, '/body/id'],
];
const DESTINATION_CHANGE: Case[] = [
  ['an unknown type', { type: 'pigeon' }, '/body/type'],
  ['a type its stored value does not fit', { type: 'sms' }, '/body/value'],
  ['an empty value', { value: '' }, '/body/value'],
  ['a value that does not fit its stored type', { value: '+14155550123' }, '/body/value'],
  ['a label of 256 characters', { label: long(256) }, '/body/label'],
  ['an unknown field', { id: 'mine' }, '/body/id'],
];

const SKILL_FIELDS: Case[] = [
  ['an empty name', { name: '' }, '/body/name'],
  ['a name of 256 characters', { name: long(256) }, '/body/name'],
  ['a name that is a number', { name: 42 }, '/body/name'],
  ['an empty content', { content: '' }, '/body/content'],
  ['a content above 100000 characters', { content: long(100_001) }, '/body/content'],
  ['a content that is a number', { content: 7 }, '/body/content'],
  ['a category of 101 characters', { category: long(101) }, '/body/category'],
  ['a category that is a number', { category: 5 }, '/body/category'],
  ['a description of 2001 characters', { description: long(2001) }, '/body/description'],
  ['a frontmatter that is text', { frontmatter: 'author: Ada' }, FM],
  ['an unknown frontmatter key', { frontmatter: { owner: 'me' } }, `${FM}/owner`],
  ['an author of 201 characters', { frontmatter: { author: long(201) } }, `${FM}/author`],
  ['tags that are not an array', { frontmatter: { tags: 'a,b' } }, `${FM}/tags`],
  ['a tag of 51 characters', { frontmatter: { tags: [long(51)] } }, `${FM}/tags/0`],
  [
    'a required source that is no slug',
    { frontmatter: { requiredSources: ['A B'] } },
    `${FM}/requiredSources/0`,
  ],
  ['isPublic as a string', { isPublic: 'true' }, '/body/isPublic'],
  ['isUserInvocable as a number', { isUserInvocable: 1 }, '/body/isUserInvocable'],
  ['an unknown field', { owner: 'me' }, '/body/owner'],
];
const SKILL_CREATE_ONLY: Case[] = [
  ...missing('name', 'content'),
  ...ORGANIZATION_ID_ON_CREATE,
  ['a slug with capitals', { slug: 'Market-Brief' }, '/body/slug'],
  ['an iconUrl that is not http(s)', { iconUrl: 'javascript:alert(1)' }, '/body/iconUrl'],
];
const SKILL_UPDATE_ONLY: Case[] = [
  ['a slug, which never changes', { slug: 'new-slug' }, '/body/slug'],
  ORGANIZATION_ID_ON_UPDATE,
];

type SourceType = 'mcp' | 'api' | 'local';
const stdio = { transport: 'stdio' };
const npx = { command: 'npx' };
/** Config rules per type: [what, type, config, key of /body/config it must name]. An update keeps the type. */
const SOURCE_CONFIGS: [string, SourceType, unknown, string][] = [
  ['an mcp config with neither transport, command nor url', 'mcp', {}, '/transport'],
  ['an unknown mcp transport', 'mcp', { transport: 'carrier-pigeon' }, '/transport'],
  ['an mcp stdio config without a command', 'mcp', stdio, '/command'],
  ['an mcp stdio config with an empty command', 'mcp', { ...stdio, command: '' }, '/command'],
  ['an mcp stdio command the service does not allow', 'mcp', { ...stdio, command: 'bash' }, '/command'],
  ['an mcp http config without a url', 'mcp', { transport: 'http' }, '/url'],
  ['an mcp websocket config without a url', 'mcp', { transport: 'websocket' }, '/url'],
  ['an mcp http config with a ws url', 'mcp', { transport: 'http', url: 'wss://x.example.com' }, '/url'],
  ['an mcp websocket config with an http url', 'mcp', { transport: 'websocket', url: 'http://x.io' }, '/url'],
  ['an mcp url that is not a URL', 'mcp', { url: 'not a url' }, '/url'],
  ['args that are not an array', 'mcp', { ...npx, args: '-y server' }, '/args'],
  ['an argument that is a number', 'mcp', { ...npx, args: [1] }, '/args/0'],
  ['an env name that is not a variable name', 'mcp', { ...npx, env: { 'BAD-NAME': 'x' } }, '/env/BAD-NAME'],
  ['an env value that is a number', 'mcp', { ...npx, env: { A: 1 } }, '/env/A'],
  ['the mask as a new env value', 'mcp', { ...npx, env: { NEVER_SET: MASK } }, '/env/NEVER_SET'],
  ['the mask as env constructor', 'mcp', { ...npx, env: { constructor: MASK } }, '/env/constructor'],
  ['an api config without a baseUrl', 'api', {}, '/baseUrl'],
  ['an api baseUrl that is ftp', 'api', { baseUrl: 'ftp://files.example.com' }, '/baseUrl'],
  ['an api baseUrl that is not a URL', 'api', { baseUrl: 'not a url' }, '/baseUrl'],
  ['an api baseUrl that is a number', 'api', { baseUrl: 5 }, '/baseUrl'],
  ['an unknown config key', 'local', { shell: 'sh' }, '/shell'],
  ['a config that is text', 'local', 'transport=stdio', ''],
];
const SOURCE_FIELDS: Case[] = [
  ['an empty name', { name: '' }, '/body/name'],
  ['a name of 256 characters', { name: long(256) }, '/body/name'],
  ['a name that is a number', { name: 42 }, '/body/name'],
  ['a description of 2001 characters', { description: long(2001) }, '/body/description'],
  ['an unknown authType', { authType: 'magic' }, '/body/authType'],
  ['an authConfig that is text', { authConfig: 'Bearer x' }, '/body/authConfig'],
  ['an unknown authConfig key', { authConfig: { secret: 'x' } }, '/body/authConfig/secret'],
  ['a token that is a number', { authConfig: { token: 5 } }, '/body/authConfig/token'],
  ['the mask as a new token', { authConfig: { token: MASK } }, '/body/authConfig/token'],
  ['an unknown field', { tools: [] }, '/body/tools'],
];
const SOURCE_CREATE_ONLY: Case[] = [
  ...missing('name', 'type', 'config'),
  ...ORGANIZATION_ID_ON_CREATE,
  ['an unknown type', { type: 'ftp' }, '/body/type'],
  ['a slug with spaces', { slug: 'Not A Slug' }, '/body/slug'],
  ['an iconUrl that is a file URL', { iconUrl: 'file:///etc/passwd' }, '/body/iconUrl'],
  ['isActive, which only an update sets', { isActive: true }, '/body/isActive'],
];
const SOURCE_UPDATE_ONLY: Case[] = [
  ['isActive as a string', { isActive: 'yes' }, '/body/isActive'],
  ['a type, which never changes', { type: 'api' }, '/body/type'],
  ['a slug, which never changes', { slug: 'new-slug' }, '/body/slug'],
];

describe('validation of every request constraint', () => {
  // Some 300 requests from one organization: its rate limit is raised out of the way.
  const fx = useTestService({
    orgs: ['paid'],
    env: { SVC_STDIO_COMMANDS: 'npx[TOKEN,NEVER_SET,constructor]', SVC_ROLE: 'api' },
    rateLimitPerMinute: 100_000,
  });
  const calls = {
    tasks: resourceCalls(fx, 'tasks'),
    skills: resourceCalls(fx, 'skills'),
    sources: resourceCalls(fx, 'sources'),
  };
  /** A create whose body is exactly `fields` over `base` (the organization's id included, unless left out). */
  const create = (
    resource: keyof typeof calls,
    base: Record<string, unknown>,
    fields: Record<string, unknown>,
  ) =>
    fx.svc.call({
      method: 'POST',
      url: `/api/svc/${resource}`,
      key: fx.org.apiKey,
      body: { organizationId: fx.org.organizationId, ...base, ...fields },
    });

  const ids = { task: '', destination: '', skill: '', mcp: '', api: '', local: '' };
  /** Each resource as it was before any refused request. */
  const originals = new Map<string, string>();
  const read = async (url: string) => {
    const res = await fx.svc.call({ method: 'GET', url, key: fx.org.apiKey });
    assert.equal(res.status, 200, res.raw);
    return res.raw;
  };
  const created = (res: Reply) => {
    assert.equal(res.status, 201, res.raw);
    return res.body.id as string;
  };

  before(async () => {
    const task = await calls.tasks.create(fx.org, {
      name: 'Valid',
      prompt: 'Valid',
      destinations: [{ type: 'email', value: 'ops@example.com' }],
    });
    ids.task = created(task);
    ids.destination = task.body.destinations[0].id;
    ids.skill = created(await calls.skills.create(fx.org, { name: 'Valid', content: 'Valid' }));
    const configs = {
      mcp: { command: 'npx', env: { TOKEN: 'secret' } },
      api: { baseUrl: 'https://api.example.com' },
      local: {},
    };
    for (const type of ['mcp', 'api', 'local'] as const) {
      ids[type] = created(await calls.sources.create(fx.org, { name: type, type, config: configs[type] }));
    }
    for (const url of [
      `/api/svc/tasks/${ids.task}`,
      `/api/svc/skills/${ids.skill}`,
      ...(['mcp', 'api', 'local'] as const).map((t) => `/api/svc/sources/${ids[t]}`),
    ]) {
      originals.set(url, await read(url));
    }
  });

  /** One test per case: `send` makes the request with the case's fields. */
  const refusals = (
    action: string,
    cases: Case[],
    send: (fields: Record<string, unknown>) => Promise<Reply>,
  ) => {
    for (const [what, fields, path] of cases) {
      test(`${action} with ${what} answers 400 naming ${path}`, async () => {
        assertRefused(await send(fields), path);
      });
    }
  };
  const taskBase = { name: 'Valid', prompt: 'Valid' };
  refusals('creating a task', [...TASK_FIELDS, ...TASK_CREATE_ONLY], (f) => create('tasks', taskBase, f));
  refusals('updating a task', [...TASK_FIELDS, ...TASK_UPDATE_ONLY], (f) =>
    calls.tasks.patch(fx.org, ids.task, f),
  );
  refusals('adding a destination', DESTINATION_ADD, (f) =>
    fx.svc.call({
      method: 'POST',
      url: `/api/svc/tasks/${ids.task}/destinations`,
      key: fx.org.apiKey,
      body: { type: 'email', value: 'team@example.com', ...f },
    }),
  );
  refusals('changing an email destination', DESTINATION_CHANGE, (f) =>
    fx.svc.call({
      method: 'PATCH',
      url: `/api/svc/tasks/${ids.task}/destinations/${ids.destination}`,
      key: fx.org.apiKey,
      body: f,
    }),
  );
  const skillBase = { name: 'Valid', content: 'Valid' };
  refusals('creating a skill', [...SKILL_FIELDS, ...SKILL_CREATE_ONLY], (f) =>
    create('skills', skillBase, f),
  );
  refusals('updating a skill', [...SKILL_FIELDS, ...SKILL_UPDATE_ONLY], (f) =>
    calls.skills.patch(fx.org, ids.skill, f),
  );
  for (const [what, type, config, key] of SOURCE_CONFIGS) {
    const cases: Case[] = [[what, { config }, `/body/config${key}`]];
    refusals('creating a source', cases, (f) => create('sources', { name: 'Valid', type }, f));
    refusals('updating a source', cases, (f) => calls.sources.patch(fx.org, ids[type], f));
  }
  const sourceBase = { name: 'Valid', type: 'local', config: {} };
  refusals('creating a source', [...SOURCE_FIELDS, ...SOURCE_CREATE_ONLY], (f) =>
    create('sources', sourceBase, f),
  );
  refusals('updating a source', [...SOURCE_FIELDS, ...SOURCE_UPDATE_ONLY], (f) =>
    calls.sources.patch(fx.org, ids.local, f),
  );

  test('text the database cannot store answers 400 naming where it is, in a value or in a name', async () => {
    const cases: [what: string, fields: Record<string, unknown>, path: string, message: string][] = [
      ['a NUL in the prompt', { prompt: 'a\u0000b' }, '/body/prompt', 'must not contain the NUL character'],
      [
        "a lone surrogate in a destination's label",
        { destinations: [{ ...email, label: 'x\uD800' }] },
        `${D0}/label`,
        'must be well-formed Unicode',
      ],
      [
        'a NUL in a property name of the output schema, escaped as a JSON pointer',
        { outputSchema: { type: 'object', properties: { 'a/b~\u0000': { type: 'string' } } } },
        '/body/outputSchema/properties/a~1b~0\u0000',
        'its name must not contain the NUL character',
      ],
    ];
    for (const [what, fields, path, message] of cases) {
      const res = await create('tasks', taskBase, fields);
      assertRefused(res, path);
      const detail = res.body.error.details.find((d: { path: string }) => d.path === path);
      assert.ok(detail.message.startsWith(message), `${what}: ${detail.message}`);
    }
  });

  test('a body that is not an object answers 400 naming the body, on create and on update', async () => {
    for (const resource of ['tasks', 'skills', 'sources'] as const) {
      const res = await fx.svc.call({
        method: 'POST',
        url: `/api/svc/${resource}`,
        key: fx.org.apiKey,
        body: [],
      });
      assertRefused(res, '/body');
    }
    assertRefused(await calls.tasks.patch(fx.org, ids.task, ['name']), '/body');
  });

  test('an id in the path that is not a uuid answers 400 naming the parameter', async () => {
    for (const [url, path] of [
      ['/api/svc/tasks/nope', '/path/taskId'],
      ['/api/svc/tasks/nope/runs', '/path/taskId'],
      ['/api/svc/tasks/nope/destinations', '/path/taskId'],
      ['/api/svc/runs/nope', '/path/runId'],
      ['/api/svc/skills/nope', '/path/skillId'],
      ['/api/svc/sources/nope', '/path/sourceId'],
    ]) {
      assertRefused(await fx.svc.call({ method: 'GET', url: url ?? '', key: fx.org.apiKey }), path ?? '');
    }
  });

  test('no refused request created or changed anything', async () => {
    for (const [url, before] of originals) assert.equal(await read(url), before, url);
    for (const [resource, count] of [
      ['tasks', 1],
      ['skills', 1],
      ['sources', 3],
    ] as const) {
      assert.equal((await calls[resource].list(fx.org)).body.length, count, `${resource} created`);
    }
    const destinations = await read(`/api/svc/tasks/${ids.task}/destinations`);
    assert.equal(JSON.parse(destinations).length, 1);
  });
});
