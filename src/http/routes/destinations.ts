import type { Deps } from '../../domain/deps.ts';
import type { App } from '../types.ts';

export function destinationRoutes(_app: App, _deps: Deps): void {}
