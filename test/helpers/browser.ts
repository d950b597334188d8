// Debian's Chromium driven by playwright-core (no browser download): the flags keep it from
// reaching the network on its own and let it run as root in CI containers.
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { type Browser, chromium, type Page } from 'playwright-core';
import { signUp } from '../../src/domain/users.ts';
import type { TestService } from './service.ts';

export const CHROMIUM = '/usr/bin/chromium';

/** `extraArgs`: more Chromium flags, e.g. `--host-resolver-rules` to reach the service by another name. */
export async function launchBrowser(extraArgs: string[] = []): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium), as .ci/run does`,
    );
  }
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-quic',
      '--no-first-run',
      '--disable-sync',
      ...extraArgs,
    ],
  });
}

/**
 * A page of a new browser context signed in as a new person who owns a new organization (made
 * by signing up, as the dashboard does), on the listening service at `base`.
 */
export async function signedInPage(
  browser: Browser,
  svc: TestService,
  base: string,
  organizationName: string,
): Promise<Page> {
  const made = await signUp(svc.service.deps, {
    email: `person-${randomUUID()}@example.com`,
    password: 'correct horse battery',
    organizationName,
  });
  const context = await browser.newContext();
  await context.addCookies([{ name: 'svc_session', value: made.session.token, url: base }]);
  return context.newPage();
}
