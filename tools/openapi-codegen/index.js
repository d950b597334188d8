// The part of openapi-typescript the project uses, resolved here, next to the TypeScript 5 it
// needs (its peer dependency), so that the project's own TypeScript 7 stays what type-checks.
export { astToString, default as openapiTS } from 'openapi-typescript';
