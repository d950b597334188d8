import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fastJsonStringify from 'fast-json-stringify';
import { Type } from 'typebox';
import { serializationSchema } from '../src/http/plugins/serialization.ts';
import { AdminApiKey } from '../src/schemas/admin.ts';
import { Task } from '../src/schemas/task.ts';

type Schema = Parameters<typeof fastJsonStringify>[0];
const asWritten = (schema: unknown) => fastJsonStringify(JSON.parse(JSON.stringify(schema)) as Schema);
const asServed = (schema: unknown) =>
  fastJsonStringify(serializationSchema(JSON.parse(JSON.stringify(schema))) as Schema);

const task = {
  id: '16a70de8-3f91-4e8c-98c0-bd4949389d98',
  createdAt: '2026-11-29T21:27:45.297Z',
  model: 'google/gemini-2.5-flash',
  name: 'Weekly "digest" \u2014 \\ \n',
  prompt: 'Summarise the week in five bullet points.',
  schedule: 'weekly',
  status: 'active',
  destinations: [{ id: 'b1f9a3c2-8d4e-4f5a-9b6c-7d8e9f0a1b2c', type: 'email', value: 'a@example.com' }],
  lastRunAt: null,
  nextRunAt: '2026-11-30T07:30:00.000Z',
  organizationId: 'f33ff513-1cdd-4573-b706-4ff88149ab12',
  scheduleDays: ['monday', 'thursday'],
  scheduleTime: '08:30',
  skillIds: [],
  sourceIds: [],
  timezone: 'Europe/Berlin',
  updatedAt: '2026-11-29T21:27:45.297Z',
  autoPauseAfterFailures: 5,
  deliverOn: 'always',
  consecutiveFailures: 0,
};

describe('answers are written from schemas whose nullable scalars are type lists', () => {
  test('a nullable date-time becomes one type list that keeps its format', () => {
    const schema = serializationSchema({
      anyOf: [{ type: 'string', format: 'date-time' }, { type: 'null' }],
    });
    assert.deepEqual(schema, { type: ['string', 'null'], format: 'date-time' });
  });

  test('a choice with an object or array branch, repeated types or two formats is left as written', () => {
    const kept = [
      { anyOf: [{ type: 'array', items: { type: 'string' } }, { type: 'null' }] },
      { anyOf: [{ type: 'object', properties: { a: { type: 'string' } } }, { type: 'null' }] },
      {
        anyOf: [
          { type: 'string', format: 'date-time' },
          { type: 'string', format: 'email' },
        ],
      },
      { anyOf: [{ type: 'string', format: 'date-time' }, { type: 'string' }] },
      { anyOf: [{ type: 'string', enum: ['a'] }, { type: 'null' }] },
      { anyOf: [{ type: 'integer' }, { type: 'null' }] },
    ];
    for (const schema of kept) assert.deepEqual(serializationSchema(schema), schema);
  });

  test('a task list and a key list are written exactly as their schemas as written write them', () => {
    const tasks = Array.from({ length: 20 }, (_, i) => ({
      ...task,
      name: `${task.name} ${i}`,
      lastRunAt: i % 2 ? '2026-11-29T21:27:45.297Z' : null,
      nextRunAt: i % 3 ? task.nextRunAt : null,
    }));
    const list = Type.Array(Task);
    assert.equal(asServed(list)(tasks), asWritten(list)(tasks));
    const keys = [null, '2026-12-01T00:00:00.000Z'].map((at) => ({
      id: '0c0f9e8d-7b6a-4c5d-9e8f-7a6b5c4d3e2f',
      organizationId: task.organizationId,
      name: 'deploy',
      prefix: 'svc_live_ab12',
      createdAt: task.createdAt,
      expiresAt: at,
      revokedAt: null,
      lastUsedAt: at,
    }));
    const keyList = Type.Array(AdminApiKey);
    assert.equal(asServed(keyList)(keys), asWritten(keyList)(keys));
  });

  test('the served schema of a task is no longer a choice anywhere it was a nullable scalar', () => {
    const text = JSON.stringify(serializationSchema(JSON.parse(JSON.stringify(Task))));
    assert.ok(text.includes('"type":["string","null"]'));
    assert.ok(
      !JSON.stringify(serializationSchema(JSON.parse(JSON.stringify(Task.properties.lastRunAt)))).includes(
        'anyOf',
      ),
    );
  });
});
