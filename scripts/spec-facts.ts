// Writes test/spec-facts.json, the facts of the interface specification the contract test
// compares with the OpenAPI document, from the spec's Markdown. Run with `npm run spec-facts`
// after the spec changes (default: ../shared/spec/interface-spec.md beside the project, or the
// path given as the first argument), then review and commit the file.
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { factsOfMarkdown, SPEC_FACTS_URL, SPEC_MARKDOWN_URL } from '../test/helpers/spec-facts.ts';

const source = process.argv[2] ? pathToFileURL(process.argv[2]) : SPEC_MARKDOWN_URL;
const facts = factsOfMarkdown(readFileSync(source, 'utf8'));
const out = fileURLToPath(SPEC_FACTS_URL);
writeFileSync(out, `${JSON.stringify(facts, null, 2)}\n`);

// The file is linted with the rest of the tree, so it is written in the formatter's layout.
const biome = fileURLToPath(new URL('../node_modules/.bin/biome', import.meta.url));
const formatted = spawnSync(biome, ['format', '--write', out], { stdio: 'inherit' });
if (formatted.status !== 0) process.exit(formatted.status ?? 1);

const count = (o: object) => Object.keys(o).length;
console.log(
  `${out}: ${count(facts.resources)} resources, ${count(facts.bodies)} request bodies, ` +
    `${facts.endpoints.length} endpoints, ${facts.taskConstraints.length} task constraints (from ${fileURLToPath(source)})`,
);
