// `npm start` and the container image's command: check the Node.js version, then load the
// server (src/main.ts). Plain JavaScript that old versions of Node parse, so that on one older
// than 24, which cannot load TypeScript files, the process stops with one line saying what is
// needed instead of a stack trace about a `.ts` extension. That is the case after a production
// install (`npm install --omit=dev`), where the project's own Node 24 (the `node` dev
// dependency) is absent and npm scripts run the system's `node`. The TypeScript is imported only
// after the check: a static import would be loaded before any of this file runs.
const NEEDED_MAJOR = 24;
const found = process.versions.node;

if (Number(found.split('.')[0]) < NEEDED_MAJOR) {
  process.stderr.write(
    `svc: cannot start: this service needs Node.js ${NEEDED_MAJOR} or newer (found ${found}); install Node.js ${NEEDED_MAJOR}, or run \`npm install\` with the dev dependencies so that npm scripts use the Node.js it brings\n`,
  );
  process.exit(1);
}

// Node's compile cache (in the system's temporary directory unless NODE_COMPILE_CACHE names
// another) keeps the code of every module, the TypeScript already stripped of its types, from
// one start to the next: a start after the first neither loads the type stripper (about 20 MB
// of memory the process would keep) nor compiles the modules again. A cache that cannot be
// written is no error: the start only takes longer.
import('node:module').then((module) => {
  if (module.enableCompileCache) module.enableCompileCache();
  return import('./main.ts');
});
