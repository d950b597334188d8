// Debian's Chromium driven by playwright-core (no browser download): the flags keep it from
// reaching the network on its own and let it run as root in CI containers.
import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';

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
