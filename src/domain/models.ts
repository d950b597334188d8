import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { newAjv } from '../lib/ajv.ts';
import type { CatalogFile, CatalogModel } from '../schemas/model-catalog.ts';

/** The catalog shipped with the code; SVC_MODELS_FILE replaces it with an operator's file. */
export const SHIPPED_CATALOG_FILE = fileURLToPath(new URL('./models-catalog.json', import.meta.url));

export type { CatalogModel } from '../schemas/model-catalog.ts';

export interface ModelCatalog {
  /** Every model, in catalog order. */
  list(): CatalogModel[];
  /** A model by its uuid (any letter case) or its routerModelId. */
  find(idOrRouterId: string): CatalogModel | undefined;
  /** The entry marked `"default": true`. */
  defaultModel: CatalogModel;
}

/**
 * CatalogFile as JSON (models-catalog.schema.json, written from schemas/model-catalog.ts by
 * `npm run schema-json`; test/schema-json.test.ts keeps the two equal): every process reads the
 * catalog, and TypeBox's builders would add some 370 modules (about 10 MB) to a process that
 * needs no other schema (docs/architecture.md, "Lazy roles").
 */
const catalogSchema = JSON.parse(
  readFileSync(new URL('./models-catalog.schema.json', import.meta.url), 'utf8'),
) as typeof CatalogFile;

// The catalog is JSON, checked like a request body: types exact, every problem found.
const validateCatalog = newAjv('json').compile<CatalogModel[]>(catalogSchema);

/** Why the parsed catalog is unusable, or undefined when it is fine. */
function catalogProblem(data: unknown): string | undefined {
  if (!validateCatalog(data)) {
    const first = validateCatalog.errors?.[0];
    return first ? `${first.instancePath || '/'} ${first.message ?? 'is invalid'}` : 'is invalid';
  }
  const models = data as CatalogModel[];
  const ids = new Set<string>();
  const routerIds = new Set<string>();
  for (const [i, m] of models.entries()) {
    const id = m.id.toLowerCase();
    if (ids.has(id)) return `/${i}/id duplicate id ${m.id}`;
    ids.add(id);
    if (routerIds.has(m.routerModelId))
      return `/${i}/routerModelId duplicate routerModelId ${m.routerModelId}`;
    routerIds.add(m.routerModelId);
  }
  const defaults = models.filter((m) => m.default === true).length;
  if (defaults !== 1) return `exactly one model must have "default": true, found ${defaults}`;
  return undefined;
}

/**
 * Reads and validates the model catalog: the operator's file when given (SVC_MODELS_FILE),
 * else the one shipped with the code. A bad file throws one line naming the file and the problem.
 */
export function loadModelCatalog(file?: string): ModelCatalog {
  const path = file ?? SHIPPED_CATALOG_FILE;
  const fail = (problem: string, cause?: unknown) =>
    new Error(`SVC_MODELS_FILE ${path}: ${problem}`, cause === undefined ? undefined : { cause });
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw fail(`cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`, err);
  }
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw fail(`is not valid JSON (${(err as Error).message.split('\n')[0]})`, err);
  }
  const problem = catalogProblem(data);
  if (problem) throw fail(problem);
  return createModelCatalog(data as CatalogModel[]);
}

function createModelCatalog(entries: CatalogModel[]): ModelCatalog {
  const models = entries.map((m) => Object.freeze({ ...m, id: m.id.toLowerCase() }));
  const byKey = new Map<string, CatalogModel>();
  for (const m of models) {
    byKey.set(m.id, m);
    byKey.set(m.routerModelId, m);
  }
  const defaultModel = models.find((m) => m.default === true);
  if (!defaultModel) throw new Error('model catalog without a default model');
  return {
    list: () => [...models],
    find: (key) => byKey.get(key) ?? byKey.get(key.toLowerCase()),
    defaultModel,
  };
}

/** The Model resource as the spec gives it: no prices, no default flag. */
export interface ModelView {
  id: string;
  name: string;
  provider: string;
  routerModelId: string;
  codingIndex: number;
  intelligenceIndex: number;
  contextLength: number;
  outputSpeed: number;
  powerTier: number;
  supportsInternetSearch: boolean;
  supportsToolCalling: boolean;
}

export function modelView(m: CatalogModel): ModelView {
  return {
    id: m.id,
    name: m.name,
    provider: m.provider,
    routerModelId: m.routerModelId,
    codingIndex: m.codingIndex,
    intelligenceIndex: m.intelligenceIndex,
    contextLength: m.contextLength,
    outputSpeed: m.outputSpeed,
    powerTier: m.powerTier,
    supportsInternetSearch: m.supportsInternetSearch,
    supportsToolCalling: m.supportsToolCalling,
  };
}

/** Catalog-price cost of a model call in cents (used when the provider reports no cost). */
export function catalogCostCents(m: CatalogModel, promptTokens: number, completionTokens: number): number {
  return (
    (promptTokens * m.inputCentsPerMillionTokens + completionTokens * m.outputCentsPerMillionTokens) / 1e6
  );
}
