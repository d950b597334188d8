/**
 * Reads the interface specification's Markdown (resource field tables, request body lists and
 * endpoint tables) into data the contract test compares with the served OpenAPI document;
 * `scripts/spec-facts.ts` writes that data to test/spec-facts.json, which the test reads.
 * Anything the parser does not understand becomes an `unknown` type, which the comparison
 * reports, so a change of the spec's wording cannot silently turn a check off.
 */

export type SpecType =
  | { kind: 'string'; format?: string }
  | { kind: 'number' }
  | { kind: 'boolean' }
  | { kind: 'enum'; values: string[] }
  | { kind: 'array'; items: SpecType }
  | { kind: 'object'; fields?: SpecField[] }
  | { kind: 'map'; values: SpecType }
  | { kind: 'any' }
  | { kind: 'resource'; name: string }
  | { kind: 'unknown'; text: string };

export interface SpecField {
  name: string;
  type: SpecType;
  /** The spec says the value may be null ("or null", or a note such as "null for unlimited"). */
  nullable: boolean;
  /** 'req' in the spec: always present in a response (or required in a request body). */
  required: boolean;
  /** Bounds a note gives a number ("minimum 0, maximum 100"). */
  minimum?: number;
  maximum?: number;
}

/** A row of "Request constraints on task creation": lengths and formats of a create-body field. */
export interface SpecConstraint {
  name: string;
  minLength?: number;
  maxLength?: number;
  format?: string;
  /** "`HH:MM`, 24-hour" */
  time24?: boolean;
}

export interface SpecEndpoint {
  method: string;
  path: string;
  input: string;
  returns: string;
}

export interface Spec {
  /** Resource name (the section heading, e.g. `Task`, `Billing status`, `Source config`) to fields. */
  resources: Map<string, SpecField[]>;
  /** Request body name (e.g. `Task create`, `Skill update`) to fields. */
  bodies: Map<string, SpecField[]>;
  endpoints: SpecEndpoint[];
  /** Request constraints on task creation. */
  taskConstraints: SpecConstraint[];
}

const FORMATS = ['uuid', 'date-time', 'email', 'uri'];
const RESOURCE_NAMES = ['Destination', 'Skill', 'Source', 'Tool', 'Run', 'Task', 'Model'];

const backticked = (text: string) => [...text.matchAll(/`([^`]+)`/g)].map((m) => m[1] as string);

/** One type as the spec writes it: `string (uuid)`, `enum \`a\`, \`b\``, `array of Skill`, ... */
export function parseType(raw: string): SpecType {
  const text = raw.trim().replace(/, opt$/, '');
  if (text.startsWith('enum ')) return { kind: 'enum', values: backticked(text) };
  const arrayOf = /^array of (.+)$/.exec(text);
  if (arrayOf) return { kind: 'array', items: parseType(arrayOf[1] as string) };
  const mapOf = /^map of string to (.+)$/.exec(text);
  if (mapOf) return { kind: 'map', values: parseType(mapOf[1] as string) };
  if (text === 'any JSON') return { kind: 'any' };
  // `string (uuid)`, `string, email`, `string, IANA name`, `string, \`HH:MM\``, `uuid`
  const str = /^strings?(?: \(([^)]+)\)|, (.+))?$/.exec(text);
  if (str) {
    const qualifier = str[1] ?? str[2];
    return qualifier && FORMATS.includes(qualifier)
      ? { kind: 'string', format: qualifier }
      : { kind: 'string' };
  }
  if (FORMATS.includes(text)) return { kind: 'string', format: text };
  if (/^numbers?$/.test(text)) return { kind: 'number' };
  if (/^booleans?$/.test(text)) return { kind: 'boolean' };
  if (text === 'object') return { kind: 'object' };
  if (RESOURCE_NAMES.includes(text)) return { kind: 'resource', name: text };
  return { kind: 'unknown', text: raw };
}

const bounds = (note: string) => {
  const min = /minimum (\d+)/i.exec(note)?.[1];
  const max = /maximum (\d+)/i.exec(note)?.[1];
  return {
    ...(min !== undefined && { minimum: Number(min) }),
    ...(max !== undefined && { maximum: Number(max) }),
  };
};

function constraintRows(section: Section): SpecConstraint[] {
  return (tables(section.lines)[0]?.rows ?? []).map(([name, text = '']) => {
    const minLength = /minimum length (\d+)/.exec(text)?.[1];
    const maxLength = /maximum length (\d+)/.exec(text)?.[1];
    const format = /\b(uuid|email|date-time|uri)\b/i.exec(text)?.[1]?.toLowerCase();
    return {
      name: name as string,
      ...(minLength !== undefined && { minLength: Number(minLength) }),
      ...(maxLength !== undefined && { maxLength: Number(maxLength) }),
      ...(format !== undefined && { format }),
      ...(/`HH:MM`, 24-hour/.test(text) && { time24: true }),
    };
  });
}

/** The keys a note describes, as in "`author` (string, opt), `tags` (array of string, opt)". */
export function keysOfNote(note: string): SpecField[] {
  return [...note.matchAll(/`(\w+)` \(([^;)]*?), opt[;)]/g)].map((m) => ({
    name: m[1] as string,
    type: parseType(m[2] as string),
    nullable: false,
    required: false,
  }));
}

interface Section {
  heading: string;
  level: number;
  lines: string[];
}

function sections(markdown: string): Section[] {
  const out: Section[] = [];
  let current: Section = { heading: '', level: 0, lines: [] };
  for (const line of markdown.split('\n')) {
    const h = /^(#{2,3}) (.+)$/.exec(line);
    if (h) {
      out.push(current);
      current = { heading: (h[2] as string).trim(), level: (h[1] as string).length, lines: [] };
    } else current.lines.push(line);
  }
  out.push(current);
  return out;
}

const cells = (row: string) =>
  row
    .trim()
    .replace(/^\||\|$/g, '')
    .split('|')
    .map((c) => c.trim());

interface Table {
  /** The non-empty line just before the table. */
  leadIn: string;
  header: string[];
  rows: string[][];
}

function tables(lines: string[]): Table[] {
  const out: Table[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i]?.startsWith('|') || lines[i - 1]?.startsWith('|')) continue;
    let j = i + 2; // header and separator
    const rows: string[][] = [];
    while (lines[j]?.startsWith('|')) rows.push(cells(lines[j++] as string));
    const leadIn = lines.slice(0, i).findLast((l) => l.trim() !== '') ?? '';
    out.push({ leadIn, header: cells(lines[i] as string), rows });
    i = j;
  }
  return out;
}

/** The field table of a resource section (and the nested-object tables after it, e.g. Source `config`). */
function resourceTables(section: Section, resources: Map<string, SpecField[]>): void {
  const prose = section.lines.join('\n');
  const allOptional = /All fields are optional|all keys optional/i.test(prose);
  const [main, ...nested] = tables(section.lines);

  // "All fields are optional numbers: `a`, `b`." and "an object with an optional `url` (string)"
  if (!main) {
    const list = /All fields are optional (\w+): (.+)/.exec(prose);
    if (list) {
      const type = parseType(list[1] as string);
      resources.set(
        section.heading,
        backticked(list[2] as string).map((name) => ({ name, type, nullable: false, required: false })),
      );
      return;
    }
    const fields = [...prose.matchAll(/optional `(\w+)` \(([^)]+)\)/g)].map((m) => ({
      name: m[1] as string,
      type: parseType(m[2] as string),
      nullable: false,
      required: false,
    }));
    if (fields.length > 0) resources.set(section.heading, fields);
    return;
  }

  const fields: SpecField[] = [];
  const col = (name: string) => main.header.indexOf(name);
  for (const row of main.rows) {
    const typeText = row[col('Type')] ?? '';
    const note = row[col('Notes')] ?? '';
    const req = col('Req') >= 0 ? row[col('Req')] : undefined;
    const required =
      req === 'req' ? true : req === 'opt' || allOptional || /, opt$/.test(typeText) ? false : undefined;
    if (required === undefined) throw new Error(`spec: no req/opt for ${section.heading}.${row[0]}`);
    const nullable = / or null$/.test(typeText) || /\bnull\b/.test(note);
    let type = parseType(typeText.replace(/ or null$/, ''));
    if (type.kind === 'object') {
      const keys = keysOfNote(note);
      if (keys.length > 0) type = { kind: 'object', fields: keys };
    }
    for (const name of (row[0] ?? '').split(',').map((n) => n.trim())) {
      fields.push({ name, type, nullable, required, ...bounds(note) });
    }
  }
  resources.set(section.heading, fields);

  // "Source `config` object, all keys optional:" then a Key | Type | Notes table.
  for (const table of nested) {
    const key = /`(\w+)` object/.exec(table.leadIn)?.[1];
    if (!key) throw new Error(`spec: a table in ${section.heading} without a known lead-in`);
    const name = `${section.heading} ${key}`;
    const all = /all keys optional/i.test(table.leadIn);
    resources.set(
      name,
      table.rows.map((row) => ({
        name: row[0] as string,
        type: parseType(row[1] as string),
        nullable: false,
        required: !all,
      })),
    );
    const owner = fields.find((f) => f.name === key);
    if (owner) owner.type = { kind: 'resource', name };
  }
}

/**
 * A list such as "`config` (object), `name` (string), `description`, `iconUrl`, `slug` (strings)":
 * a singular type names the field just before it; a plural one ("strings") every untyped field
 * before it. Fields left untyped get `undefined`.
 */
export function parseFieldList(text: string): { name: string; type?: SpecType }[] {
  const out: { name: string; type?: SpecType }[] = [];
  let untyped = 0;
  let i = 0;
  while (i < text.length) {
    const ch = text[i];
    if (ch === '`') {
      const end = text.indexOf('`', i + 1);
      out.push({ name: text.slice(i + 1, end) });
      untyped++;
      i = end + 1;
    } else if (ch === '(') {
      let depth = 1;
      let j = i + 1;
      while (j < text.length && depth > 0) {
        if (text[j] === '(') depth++;
        if (text[j] === ')') depth--;
        j++;
      }
      const typeText = text.slice(i + 1, j - 1);
      const type = parseType(typeText);
      const plural = /^\w+s$/.test(typeText);
      for (const f of out.slice(plural ? out.length - untyped : out.length - 1)) f.type = type;
      untyped = 0;
      i = j;
    } else i++;
  }
  return out;
}

/** Request bodies, from "Task create body:" with its bullets, or "Skill update body, all optional: ...". */
function requestBodies(section: Section, bodies: Map<string, SpecField[]>): void {
  const lines = section.lines;
  for (let i = 0; i < lines.length; i++) {
    const head = /^(\w+ (?:create|update)) body(.*)$/.exec(lines[i] as string);
    if (!head) continue;
    const name = head[1] as string;
    const rest = head[2] as string;
    const fields: SpecField[] = [];
    const add = (list: { name: string; type?: SpecType }[], required: boolean) => {
      for (const f of list)
        fields.push({
          name: f.name,
          type: f.type ?? { kind: 'unknown', text: '' },
          nullable: false,
          required,
        });
    };
    if (/^, all optional: /.test(rest)) add(parseFieldList(rest.replace(/^, all optional: /, '')), false);
    const allOptional = /all fields optional/.test(rest);
    // The bullets under the heading line (nested ones included), up to the next blank-line break.
    let j = i + 1;
    while (lines[j]?.trim() === '') j++;
    let mode: 'required' | 'optional' | undefined;
    for (; lines[j] !== undefined && /^\s*- /.test(lines[j] as string); j++) {
      const bullet = (lines[j] as string).replace(/^\s*- /, '').replace(/\.$/, '');
      const nestedBullet = /^\s+- /.test(lines[j] as string);
      const labelled = /^(Required|Optional):\s*(.*)$/.exec(bullet);
      if (labelled) {
        mode = labelled[1] === 'Required' ? 'required' : 'optional';
        add(parseFieldList(labelled[2] as string), mode === 'required' && !allOptional);
        continue;
      }
      const except = /^The create fields except (.+)$/.exec(bullet);
      if (except) {
        const excluded = backticked(except[1] as string);
        const create = bodies.get(name.replace(/update$/, 'create')) ?? [];
        for (const f of create) if (!excluded.includes(f.name)) fields.push({ ...f, required: false });
        continue;
      }
      // "`status` (enum `a`, `b`)": one field; "`skillIds` replaces ...": a note, not a field.
      if (/^`\w+` \(/.test(bullet)) {
        add(parseFieldList(bullet), !allOptional && nestedBullet && mode === 'required');
      }
    }
    bodies.set(name, fields);
  }
}

function endpointRows(section: Section, endpoints: SpecEndpoint[]): void {
  for (const table of tables(section.lines)) {
    if (table.header[0] !== 'Method') continue;
    for (const row of table.rows) {
      endpoints.push({
        method: (row[0] as string).toLowerCase(),
        path: backticked(row[1] as string)[0] as string,
        input: row[2] as string,
        returns: row[3] as string,
      });
    }
  }
}

export function parseSpec(markdown: string): Spec {
  const resources = new Map<string, SpecField[]>();
  const bodies = new Map<string, SpecField[]>();
  const endpoints: SpecEndpoint[] = [];
  let taskConstraints: SpecConstraint[] = [];
  let chapter = '';
  for (const section of sections(markdown)) {
    if (section.level === 2) chapter = section.heading;
    if (section.heading === 'Request constraints on task creation') taskConstraints = constraintRows(section);
    if (chapter === 'Resources and their fields' && section.level === 3) {
      if (!/^(Format notes|Request constraints|Gaps)/.test(section.heading)) {
        resourceTables(section, resources);
      }
    }
    if (chapter === 'Endpoints') {
      requestBodies(section, bodies);
      endpointRows(section, endpoints);
    }
  }
  return { resources, bodies, endpoints, taskConstraints };
}

const hasUnknown = (t: SpecType): boolean =>
  t.kind === 'unknown' ||
  (t.kind === 'array' && hasUnknown(t.items)) ||
  (t.kind === 'map' && hasUnknown(t.values));

/**
 * The fields of a request body. One the spec lists without a type (or as "array of weekday
 * enum") has the type the resource's own table gives it: `name` in "Task create" is Task's `name`.
 */
export function bodyFields(spec: Spec, body: string): SpecField[] {
  const resource = spec.resources.get(body.split(' ')[0] as string) ?? [];
  return (spec.bodies.get(body) ?? []).map((f) => {
    const own = resource.find((r) => r.name === f.name);
    return hasUnknown(f.type) && own ? { ...f, type: own.type } : f;
  });
}

export interface SpecInput {
  where: 'query' | 'body';
  name: string;
  required: boolean;
  type: SpecType;
  maximum?: number;
}

/** An endpoint's input: "query `organizationId` (required, uuid), `limit` (optional number, maximum 100)". */
export function endpointInputs(input: string): SpecInput[] {
  const where = input.startsWith('body') ? 'body' : 'query';
  return [...input.matchAll(/`(\w+)` \((required|optional),? ([\w-]+)(?:, maximum (\d+))?/g)].map((m) => ({
    where,
    name: m[1] as string,
    required: m[2] === 'required',
    type: parseType(m[3] as string),
    ...(m[4] !== undefined && { maximum: Number(m[4]) }),
  }));
}
