import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  DISPLAY_PREFIX_LENGTH,
  displayPrefix,
  generateApiKey,
  hashApiKey,
  isWellFormedApiKey,
  KEY_PREFIX,
} from '../src/domain/api-key-format.ts';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

describe('API key format', () => {
  test('keys carry the recognisable prefix, are well formed and do not repeat', () => {
    const keys = new Set<string>();
    for (let i = 0; i < 2000; i++) {
      const key = generateApiKey();
      assert.ok(key.startsWith(KEY_PREFIX));
      assert.equal(key.length, KEY_PREFIX.length + 36);
      assert.ok(isWellFormedApiKey(key), key);
      keys.add(key);
    }
    assert.equal(keys.size, 2000);
  });

  test('changing any one character of a key breaks its checksum', () => {
    const key = generateApiKey();
    for (let i = KEY_PREFIX.length; i < key.length; i++) {
      for (const c of ALPHABET) {
        if (c === key[i]) continue;
        const typo = key.slice(0, i) + c + key.slice(i + 1);
        assert.equal(isWellFormedApiKey(typo), false, `position ${i} -> ${c}`);
      }
    }
  });

  test('other shapes are refused without any lookup', () => {
    const key = generateApiKey();
    for (const bad of [
      '',
      KEY_PREFIX,
      key.slice(0, -1),
      `${key}0`,
      key.replace(KEY_PREFIX, 'sk_'),
      `${key.slice(0, 10)}-${key.slice(11)}`,
    ]) {
      assert.equal(isWellFormedApiKey(bad), false, bad);
    }
  });

  test('only a SHA-256 hash and a short display prefix are derived for storage', () => {
    const key = generateApiKey();
    assert.match(hashApiKey(key), /^[0-9a-f]{64}$/);
    assert.equal(displayPrefix(key).length, DISPLAY_PREFIX_LENGTH);
    assert.ok(key.length - DISPLAY_PREFIX_LENGTH >= 30, 'most of the key stays secret');
  });
});
