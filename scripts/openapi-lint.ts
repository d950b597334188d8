// npm run lint:openapi: writes the OpenAPI document the service serves to dist/openapi.json
// (the app of a default install, built in this process on an in-memory database, no port
// opened), then lints it with
// Spectral (spectral:oas, .spectral.yaml) and Redocly (recommended, redocly.yaml). Any problem
// at all, a warning or a hint included, fails the run: the document stays at zero.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { loadConfig } from '../src/config.ts';
import { createLogger } from '../src/lib/logger.ts';
import { startService } from '../src/service.ts';

export const DOCUMENT_PATH = 'dist/openapi.json';

/** The document as GET /api/svc/openapi.json serves it, from an app that never listens. */
export async function buildOpenApiDocument(): Promise<Record<string, unknown>> {
  const config = loadConfig({
    SVC_DATA_DIR: 'memory://',
    SVC_CREATE_DEMO_ORG: 'false',
    // With a token the operator's routes are registered, so the document describes them too.
    SVC_ADMIN_TOKEN: randomBytes(24).toString('hex'),
    SVC_SECRET_KEY: randomBytes(32).toString('base64'),
    SVC_LOG_LEVEL: 'warn',
  });
  const service = await startService(config, {
    listen: false,
    startLoops: false,
    log: createLogger('warn'),
  });
  try {
    const app = service.app;
    if (!app) throw new Error('the service has no api role');
    const res = await app.inject({ method: 'GET', url: '/api/svc/openapi.json' });
    if (res.statusCode !== 200) throw new Error(`GET /api/svc/openapi.json answered ${res.statusCode}`);
    return res.json();
  } finally {
    await service.stop();
  }
}

function run(bin: string, args: string[]): { status: number; stdout: string } {
  const out = spawnSync(process.execPath, [resolve('node_modules/.bin', bin), ...args], {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (out.error) throw out.error;
  if (out.stderr.trim()) process.stderr.write(out.stderr);
  return { status: out.status ?? 1, stdout: out.stdout };
}

/** Problems Spectral finds, of any severity. */
function spectral(path: string): number {
  const { stdout } = run('spectral', [
    'lint',
    path,
    '--ruleset',
    '.spectral.yaml',
    '--format',
    'json',
    '--quiet',
  ]);
  const problems = JSON.parse(stdout || '[]') as { code: string; message: string; path: string[] }[];
  for (const p of problems) console.error(`spectral ${p.code}: ${p.message} at ${p.path.join('.')}`);
  return problems.length;
}

/** Problems Redocly finds, warnings included (ignored ones are listed in .redocly.lint-ignore.yaml). */
function redocly(path: string): number {
  const { stdout } = run('redocly', ['lint', path, '--config', 'redocly.yaml', '--format', 'json']);
  const report = JSON.parse(stdout) as {
    totals: { errors: number; warnings: number };
    problems: { ruleId: string; message: string; location: { pointer: string }[] }[];
  };
  for (const p of report.problems) {
    console.error(`redocly ${p.ruleId}: ${p.message} at ${p.location.map((l) => l.pointer).join(', ')}`);
  }
  return report.totals.errors + report.totals.warnings;
}

if (import.meta.main) {
  const doc = await buildOpenApiDocument();
  mkdirSync(dirname(DOCUMENT_PATH), { recursive: true });
  writeFileSync(DOCUMENT_PATH, `${JSON.stringify(doc, null, 2)}\n`);
  const found = { spectral: spectral(DOCUMENT_PATH), redocly: redocly(DOCUMENT_PATH) };
  console.log(`${DOCUMENT_PATH}: spectral ${found.spectral} problems, redocly ${found.redocly} problems`);
  if (found.spectral + found.redocly > 0) process.exitCode = 1;
}
