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
