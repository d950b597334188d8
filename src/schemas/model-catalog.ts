// The model catalog file (src/domain/models-catalog.json, or the operator's SVC_MODELS_FILE):
// one entry per model. domain/models.ts validates the file against this schema's JSON
// (src/domain/models-catalog.schema.json, written by `npm run schema-json`), not against this
// module: only that script and the tests load TypeBox's builders for it.
import { type Static, Type } from 'typebox';

/** One entry of the catalog file: the spec's Model fields plus internal prices and the default flag. */
export const CatalogEntry = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    name: Type.String({ minLength: 1 }),
    provider: Type.String({ minLength: 1 }),
    routerModelId: Type.String({ pattern: '^[^/\\s]+/[^\\s]+$' }),
    codingIndex: Type.Number({ minimum: 0, maximum: 100 }),
    intelligenceIndex: Type.Number({ minimum: 0, maximum: 100 }),
    contextLength: Type.Integer({ minimum: 1 }),
    outputSpeed: Type.Number({ minimum: 0 }),
    powerTier: Type.Integer({ minimum: 1, maximum: 5 }),
    supportsInternetSearch: Type.Boolean(),
    supportsToolCalling: Type.Boolean(),
    /**
     * Whether the model takes a JSON Schema for its answer (Chat Completions `response_format`
     * `json_schema`); without it a task's outputSchema is asked for in the messages (internal).
     */
    supportsStructuredOutput: Type.Optional(Type.Boolean()),
    /** Price of prompt tokens, in cents per million tokens (internal: used for run cost). */
    inputCentsPerMillionTokens: Type.Number({ minimum: 0 }),
    /** Price of completion tokens, in cents per million tokens (internal: used for run cost). */
    outputCentsPerMillionTokens: Type.Number({ minimum: 0 }),
    /** Exactly one entry is the default model of new tasks. */
    default: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

export const CatalogFile = Type.Array(CatalogEntry, { minItems: 1 });

export type CatalogModel = Static<typeof CatalogEntry>;
