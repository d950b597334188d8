import { closeSync, fsyncSync, openSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * Creates `path` (failing if it exists) and returns only once its content and its directory
 * entry are on disk: a file the database already depends on (the secret key, whose check value
 * the database records next) must not be lost to a power cut that the database survives.
 */
export function createFileDurably(path: string, content: string, mode: number): void {
  const fd = openSync(path, 'wx', mode);
  try {
    writeSync(fd, content);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  const dir = openSync(dirname(path), 'r');
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
}
