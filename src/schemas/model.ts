import { type Static, Type } from 'typebox';
import { Uuid } from './common.ts';

/** Model, field for field as the interface specification gives it (all optional). */
export const Model = Type.Object(
  {
    id: Type.Optional(Uuid),
    name: Type.Optional(Type.String()),
    provider: Type.Optional(Type.String({ description: 'Model provider name' })),
    routerModelId: Type.Optional(
      Type.String({ description: 'Identifier of the model at a model-routing provider' }),
    ),
    codingIndex: Type.Optional(Type.Number({ description: 'Coding benchmark score' })),
    intelligenceIndex: Type.Optional(
      Type.Number({ minimum: 0, maximum: 100, description: 'Benchmark score' }),
    ),
    contextLength: Type.Optional(Type.Number({ description: 'Maximum context window size' })),
    outputSpeed: Type.Optional(Type.Number({ description: 'Tokens per second' })),
    powerTier: Type.Optional(Type.Number({ minimum: 1, maximum: 5, description: '1 is the most powerful' })),
    supportsInternetSearch: Type.Optional(Type.Boolean()),
    supportsToolCalling: Type.Optional(Type.Boolean()),
  },
  { $id: 'Model' },
);
export type Model = Static<typeof Model>;

export const ModelIdParams = Type.Object({ modelId: Uuid }, { additionalProperties: false });
