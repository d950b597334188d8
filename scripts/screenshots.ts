// Renders the dashboard's main pages to docs/screenshots/*.png: a fresh in-memory service with
// a local model server, an organization with a few tasks and runs, and Debian's Chromium.
// Run with `npm run screenshots`.
import { launchBrowser } from '../test/helpers/browser.ts';
import { startModelServer } from '../test/helpers/model-server.ts';
import { startTestService } from '../test/helpers/service.ts';

const OUT = new URL('../docs/screenshots/', import.meta.url);

const model = await startModelServer((req) => ({
  content:
    '## Market brief\n\n- **EUR/USD** steady at 1.09\n- Oil down 1.2%\n\n| Index | Change |\n|---|---|\n| S&P 500 | +0.4% |\n| DAX | -0.1% |\n\n' +
    `_Prompt: ${req.body.messages.filter((m) => m.role === 'user').at(-1)?.content}_`,
  usage: { prompt_tokens: 1200, completion_tokens: 300, total_tokens: 1500 },
}));
const svc = await startTestService({
  listen: true,
  startLoops: true,
  env: { SVC_MODEL_BASE_URL: model.url, SVC_MODEL_API_KEY: 'sk-demo', HOST: '127.0.0.1' },
});
const base = svc.service.url ?? '';
const browser = await launchBrowser();
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const shot = async (name: string) => {
    await page.screenshot({ path: new URL(`${name}.png`, OUT).pathname, fullPage: true });
    console.log(`docs/screenshots/${name}.png`);
  };
  await page.goto(`${base}/signup`);
  await page.getByLabel('Organization name').fill('Acme Research');
  await page.getByLabel('Your name').fill('Ada Lovelace');
  await page.getByLabel('E-mail').fill('ada@example.com');
  await page.getByLabel(/^Password/).fill('correct horse battery');
  await page.getByRole('button', { name: 'Create organization' }).click();
  await page.waitForURL(/\/dashboard\/keys/);
  await page.getByLabel('Name').fill('Reporting script');
  await page.getByRole('button', { name: 'Create key' }).click();
  await shot('api-keys');

  for (const [name, mode, time] of [
    ['Market brief', 'Daily', '08:30'],
    ['Weekly competitor scan', 'Weekly', '09:00'],
  ] as const) {
    await page.goto(`${base}/dashboard/tasks/new`);
    await page.getByLabel('Name', { exact: true }).fill(name);
    await page.getByLabel('Prompt').fill(`Write the ${name.toLowerCase()} for the team.`);
    await page.getByLabel(mode).check();
    await page.getByLabel('Time', { exact: true }).fill(time);
    await page.getByLabel('Timezone').fill('Europe/Paris');
    if (mode === 'Weekly') await page.getByLabel('Mon', { exact: true }).check();
    await page.getByRole('button', { name: 'Create task' }).click();
    await page.waitForURL(/\/dashboard\/tasks\/[0-9a-f-]{36}/);
    await page.getByRole('button', { name: 'Run now' }).click();
    await page.waitForURL(/\/dashboard\/runs\//);
    await page.locator('.output').waitFor({ timeout: 20_000 });
  }
  await shot('run');
  await page.goto(`${base}/dashboard/tasks/new`);
  await shot('task-form');
  await page.goto(`${base}/dashboard/tasks`);
  await shot('tasks');
  await page.goto(`${base}/dashboard`);
  await shot('overview');
  await page.goto(`${base}/dashboard/billing`);
  await shot('billing');
} finally {
  await browser.close();
  await svc.close();
  await model.close();
}
