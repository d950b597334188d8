import {
  deref,
  fieldProblems,
  type Location,
  type OpenApiDocument,
  requestBodySchema,
  type Schema,
  typeProblems,
} from './openapi-contract.ts';
import { endpointInputs, type SpecEndpoint, type SpecField } from './spec-tables.ts';

/** Where the document carries each resource of the spec: operation, status, path into the schema. */
export const one = (op: string, status: number, ...at: string[]): Location => ({ op, status, at });
export const RESOURCE_LOCATIONS: Record<string, Location[]> = {
  Task: [
    one('GET /api/svc/tasks/{taskId}', 200),
    one('GET /api/svc/tasks', 200, 'items'),
    one('POST /api/svc/tasks', 201),
    one('PATCH /api/svc/tasks/{taskId}', 200),
  ],
  Destination: [
    one('GET /api/svc/tasks/{taskId}/destinations', 200, 'items'),
    one('POST /api/svc/tasks/{taskId}/destinations', 201),
    one('PATCH /api/svc/tasks/{taskId}/destinations/{destinationId}', 200),
  ],
  Skill: [
    one('GET /api/svc/skills/{skillId}', 200),
    one('GET /api/svc/skills', 200, 'items'),
    one('POST /api/svc/skills', 201),
    one('PATCH /api/svc/skills/{skillId}', 200),
  ],
  Source: [
    one('GET /api/svc/sources/{sourceId}', 200),
    one('GET /api/svc/sources', 200, 'items'),
    one('POST /api/svc/sources', 201),
    one('PATCH /api/svc/sources/{sourceId}', 200),
  ],
  'Source config': [one('GET /api/svc/sources/{sourceId}', 200, 'properties', 'config')],
  Tool: [
    one('GET /api/svc/sources/{sourceId}', 200, 'properties', 'tools', 'items'),
    one('POST /api/svc/sources/{sourceId}/test', 200, 'properties', 'tools', 'items'),
  ],
  Run: [
    one('GET /api/svc/runs/{runId}', 200),
    one('GET /api/svc/runs', 200, 'items'),
    one('GET /api/svc/tasks/{taskId}/runs', 200, 'items'),
    one('POST /api/svc/tasks/{taskId}/run', 202),
  ],
  Model: [one('GET /api/svc/models/{modelId}', 200), one('GET /api/svc/models', 200, 'items')],
  'Billing status': [one('GET /api/svc/billing/status', 200)],
  Statistics: [one('GET /api/svc/stats', 200)],
  'Session link': [{ op: 'POST /api/svc/billing/checkout' }, { op: 'POST /api/svc/billing/portal' }],
};
export const BODY_LOCATIONS: Record<string, string> = {
  'Task create': 'POST /api/svc/tasks',
  'Task update': 'PATCH /api/svc/tasks/{taskId}',
  'Skill create': 'POST /api/svc/skills',
  'Skill update': 'PATCH /api/svc/skills/{skillId}',
  'Source create': 'POST /api/svc/sources',
  'Source update': 'PATCH /api/svc/sources/{sourceId}',
};

/** Problems of one endpoint of the spec's tables: its uuid path parameters, query parameters and body fields. */
export function endpointProblems(
  doc: OpenApiDocument,
  e: SpecEndpoint,
  resources: Map<string, SpecField[]>,
): string[] {
  const op = `${e.method.toUpperCase()} ${e.path}`;
  const operation = doc.paths[e.path]?.[e.method];
  if (!operation) return [`${op}: missing from the document`];
  const problems: string[] = [];
  const parameters: Schema[] = (operation.parameters ?? []).map((p: Schema) => deref(doc, p));
  for (const name of [...e.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1])) {
    const p = parameters.find((x) => x.in === 'path' && x.name === name);
    if (p?.required !== true || p.schema?.format !== 'uuid')
      problems.push(`${op} {${name}}: not a required uuid`);
  }
  for (const input of endpointInputs(e.input)) {
    const at = `${op} ${input.where} ${input.name}`;
    if (input.where === 'body') {
      const fields = [{ name: input.name, type: input.type, nullable: false, required: input.required }];
      problems.push(
        ...fieldProblems(doc, requestBodySchema(doc, e.method, e.path), fields, op, { resources }),
      );
      continue;
    }
    const p = parameters.find((x) => x.in === 'query' && x.name === input.name);
    if (!p) {
      problems.push(`${at}: missing`);
      continue;
    }
    if ((p.required === true) !== input.required) problems.push(`${at}: required is ${p.required}`);
    problems.push(...typeProblems(doc, p.schema, input.type, 'forbidden', at, { resources }));
    if (input.maximum !== undefined && p.schema?.maximum !== input.maximum) {
      problems.push(`${at}: maximum ${p.schema?.maximum}, the spec says ${input.maximum}`);
    }
  }
  return problems;
}
