import type { Deps } from '../../domain/deps.ts';
import type { App } from '../types.ts';

export function modelRoutes(_app: App, _deps: Deps): void {}
