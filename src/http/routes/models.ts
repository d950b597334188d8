import { Type } from 'typebox';
import type { Deps } from '../../domain/deps.ts';
import { modelView } from '../../domain/models.ts';
import { errors } from '../../lib/errors.ts';
import { errorResponses } from '../../schemas/common.ts';
import { Model, ModelIdParams } from '../../schemas/model.ts';
import type { App } from '../types.ts';

// Paths under /api/svc: registered in the API-key scope (app.ts).
export function modelRoutes(app: App, deps: Deps): void {
  app.get(
    '/models',
    {
      schema: {
        operationId: 'listModels',
        description:
          'The catalog of models tasks can name in `model`: provider, context length, speed, benchmark scores and capabilities.',
        tags: ['models'],
        summary: 'The AI models tasks can use',
        response: { 200: Type.Array(Model), ...errorResponses(401, 429) },
      },
    },
    async () => deps.models.list().map(modelView),
  );

  app.get(
    '/models/:modelId',
    {
      schema: {
        operationId: 'getModel',
        description: 'One model of the catalog.',
        tags: ['models'],
        summary: 'One model of the catalog',
        params: ModelIdParams,
        response: { 200: Model, ...errorResponses(400, 401, 404, 429) },
      },
    },
    async (request) => {
      const model = deps.models.find(request.params.modelId);
      if (!model) throw errors.notFound('Model');
      return modelView(model);
    },
  );
}
