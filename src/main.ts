#!/usr/bin/env node
// `npm start`: the server with the configuration from the environment (see .env.example).
import { loadConfig } from './config.ts';
import { runServer } from './run-server.ts';
import { failStartup } from './startup-error.ts';

try {
  await runServer(loadConfig(process.env));
} catch (err) {
  failStartup(err);
}
