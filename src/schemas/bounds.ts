/**
 * Values that the API's schemas and the domain's rules share: the plans, and the bounds of a
 * user's credentials. They live with the schemas, the lowest layer that needs them, so that the
 * schemas import nothing from the domain (docs/architecture.md, Layers).
 */
export const PLANS = ['free', 'paid'] as const;

export const EMAIL_MAX_LENGTH = 320;
export const PASSWORD_MIN_LENGTH = 10;
export const PASSWORD_MAX_LENGTH = 200;
export const NAME_MAX_LENGTH = 255;

/** What a response shows in place of a secret; sending it back in a PATCH keeps the stored value. */
export const SECRET_MASK = '********';
/** The write-only credential keys of a source's `authConfig` (sealed at rest, masked in responses). */
export const CREDENTIAL_KEYS = ['token', 'username', 'password', 'apiKey'] as const;
export type CredentialKey = (typeof CREDENTIAL_KEYS)[number];

/** The largest cost cap a task may set: 10,000 US dollars a run. */
export const MAX_COST_CENTS_PER_RUN = 1_000_000;
/** Bytes of a task's `outputSchema` as JSON (UTF-8, serialized compactly). */
export const OUTPUT_SCHEMA_MAX_BYTES = 64 * 1024;
/** Nesting of objects and arrays in a task's `outputSchema`. */
export const OUTPUT_SCHEMA_MAX_DEPTH = 32;
export const MAX_REQUIRED_TOOLS = 20;
export const MAX_REQUIRED_TOOL_NAME = 128;
