import { type Static, Type } from 'typebox';
import { SECRET_MASK } from './bounds.ts';
import { DateTime, Nullable, StringEnum, Uuid } from './common.ts';
import { HttpUrl, Slug } from './skill.ts';

export const SOURCE_TYPES = ['mcp', 'api', 'local'] as const;
export type SourceType = (typeof SOURCE_TYPES)[number];
export const MCP_TRANSPORTS = ['stdio', 'http', 'websocket'] as const;
export type McpTransport = (typeof MCP_TRANSPORTS)[number];
export const AUTH_TYPES = [
  'none',
  'oauth',
  'bearer',
  'basic',
  'header',
  'query',
  'api_key',
  'connector',
] as const;

const Secret = Type.String({ maxLength: 4096 });
const Url = (description: string) => Type.String({ format: 'uri', maxLength: 2048, description });

const EnvMap = Type.Record(Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$', maxLength: 200 }), Secret, {
  additionalProperties: false,
  maxProperties: 100,
  description: `Environment variables of a stdio server. Values are secret: responses show ${SECRET_MASK}`,
});

export const SourceConfigInput = Type.Object(
  {
    args: Type.Optional(Type.Array(Type.String({ maxLength: 4096 }), { maxItems: 100 })),
    baseUrl: Type.Optional(Url('Base URL for api sources (http or https)')),
    command: Type.Optional(
      Type.String({ minLength: 1, maxLength: 1024, description: 'Command of a stdio server' }),
    ),
    env: Type.Optional(EnvMap),
    openapiUrl: Type.Optional(
      Url(
        'OpenAPI document of an api source (default: baseUrl + /openapi.json); its operations become tools',
      ),
    ),
    transport: Type.Optional(StringEnum(MCP_TRANSPORTS)),
    url: Type.Optional(Url('http(s) URL for http transport, ws(s) URL for websocket transport')),
  },
  { additionalProperties: false },
);
export type SourceConfigInput = Static<typeof SourceConfigInput>;

/** authType oauth: an api source names its provider's endpoints and scopes (MCP servers are discovered). */
const oauthEndpoints = {
  authorizationUrl: Type.Optional(Url('authType oauth, api sources: the authorization endpoint')),
  tokenUrl: Type.Optional(Url('authType oauth, api sources: the token endpoint')),
  scope: Type.Optional(
    Type.String({ maxLength: 1000, description: 'authType oauth: the scopes to ask for, space separated' }),
  ),
};

export const AuthConfigInput = Type.Object(
  {
    headerName: Type.Optional(Type.String({ maxLength: 200 })),
    prefix: Type.Optional(Type.String({ maxLength: 100 })),
    provider: Type.Optional(
      Type.String({
        maxLength: 100,
        description:
          "For a connector source: the connector provider's toolkit, for example github. For an oauth source: the name of a client the operator registered (SVC_OAUTH_CLIENTS)",
      }),
    ),
    ...oauthEndpoints,
    token: Type.Optional(Secret),
    username: Type.Optional(Secret),
    password: Type.Optional(Secret),
    apiKey: Type.Optional(Secret),
  },
  {
    additionalProperties: false,
    description: `token, username, password and apiKey are write-only: sealed at rest, shown as ${SECRET_MASK}`,
  },
);
export type AuthConfigInput = Static<typeof AuthConfigInput>;

const fields = {
  name: Type.String({ minLength: 1, maxLength: 255 }),
  description: Type.String({ maxLength: 2000 }),
  authType: StringEnum(AUTH_TYPES),
};

export const SourceCreateBody = Type.Object(
  {
    config: SourceConfigInput,
    name: fields.name,
    organizationId: Uuid,
    type: StringEnum(SOURCE_TYPES),
    authConfig: Type.Optional(AuthConfigInput),
    authType: Type.Optional(fields.authType),
    description: Type.Optional(fields.description),
    iconUrl: Type.Optional(HttpUrl),
    slug: Type.Optional(Slug),
  },
  { additionalProperties: false },
);
export type SourceCreateBody = Static<typeof SourceCreateBody>;

/** All optional; `config` and `authConfig` replace the stored ones whole; null clears the optional ones. */
export const SourceUpdateBody = Type.Object(
  {
    authConfig: Type.Optional(Nullable(AuthConfigInput)),
    authType: Type.Optional(Nullable(fields.authType)),
    config: Type.Optional(SourceConfigInput),
    description: Type.Optional(Nullable(fields.description)),
    isActive: Type.Optional(Type.Boolean()),
    name: Type.Optional(fields.name),
  },
  { additionalProperties: false },
);
export type SourceUpdateBody = Static<typeof SourceUpdateBody>;

export const Tool = Type.Object({
  description: Type.Optional(Type.String()),
  inputSchema: Type.Optional(Type.Unknown({ description: 'JSON Schema of the tool parameters' })),
  name: Type.Optional(Type.String()),
});
export type Tool = Static<typeof Tool>;

export const SourceConfig = Type.Object({
  args: Type.Optional(Type.Array(Type.String())),
  baseUrl: Type.Optional(Type.String({ format: 'uri' })),
  command: Type.Optional(Type.String()),
  env: Type.Optional(
    Type.Record(Type.String(), Type.String(), { description: `Values always ${SECRET_MASK}` }),
  ),
  openapiUrl: Type.Optional(Type.String({ format: 'uri' })),
  transport: Type.Optional(StringEnum(MCP_TRANSPORTS)),
  url: Type.Optional(Type.String({ format: 'uri' })),
});
export type SourceConfig = Static<typeof SourceConfig>;

export const AuthConfig = Type.Object({
  headerName: Type.Optional(Type.String()),
  prefix: Type.Optional(Type.String()),
  provider: Type.Optional(Type.String()),
  authorizationUrl: Type.Optional(Type.String({ format: 'uri' })),
  tokenUrl: Type.Optional(Type.String({ format: 'uri' })),
  scope: Type.Optional(Type.String()),
  token: Type.Optional(Type.String({ description: `${SECRET_MASK} when set` })),
  username: Type.Optional(Type.String({ description: `${SECRET_MASK} when set` })),
  password: Type.Optional(Type.String({ description: `${SECRET_MASK} when set` })),
  apiKey: Type.Optional(Type.String({ description: `${SECRET_MASK} when set` })),
});
export type AuthConfig = Static<typeof AuthConfig>;

/** The Source resource, field for field as the interface specification gives it. Never holds a secret. */
export const Source = Type.Object(
  {
    id: Uuid,
    config: SourceConfig,
    name: Type.String(),
    type: StringEnum(SOURCE_TYPES),
    authConfig: Type.Optional(AuthConfig),
    authType: Type.Optional(StringEnum(AUTH_TYPES)),
    connectorConnected: Type.Optional(Type.Boolean()),
    connectorToolkit: Type.Optional(Type.String()),
    createdAt: Type.Optional(DateTime),
    description: Type.Optional(Type.String()),
    iconUrl: Type.Optional(Type.String({ format: 'uri' })),
    isActive: Type.Optional(Type.Boolean()),
    lastConnectedAt: Type.Optional(DateTime),
    organizationId: Type.Optional(Uuid),
    slug: Type.Optional(Type.String()),
    tools: Type.Optional(Type.Array(Tool)),
    updatedAt: Type.Optional(DateTime),
  },
  { $id: 'Source' },
);
export type Source = Static<typeof Source>;

export const SourceIdParams = Type.Object({ sourceId: Uuid }, { additionalProperties: false });

/** The answer of POST /sources/{sourceId}/test (the spec's shape). */
export const SourceTestResult = Type.Object(
  {
    message: Type.Optional(Type.String()),
    success: Type.Optional(Type.Boolean()),
    tools: Type.Optional(Type.Array(Tool)),
  },
  { $id: 'SourceTestResult' },
);
export type SourceTestResult = Static<typeof SourceTestResult>;

/** The answer of POST /sources/{sourceId}/connect: where the person signs in. */
export const SourceConnectResult = Type.Object(
  {
    url: Type.String({
      format: 'uri',
      description:
        "The sign-in page to open in a browser: for an oauth source the provider's authorization URL (its state works once and expires after 10 minutes; the provider sends the browser back to <SVC_PUBLIC_URL>/oauth/callback, which completes the sign-in); for a connector source the connector provider's page",
    }),
  },
  { $id: 'SourceConnectResult' },
);
export type SourceConnectResult = Static<typeof SourceConnectResult>;
