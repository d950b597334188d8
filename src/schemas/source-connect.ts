import { type Static, Type } from 'typebox';

/** The answer of POST /sources/{sourceId}/connect: where to send the person who signs in. */
export const SourceConnectResult = Type.Object(
  {
    url: Type.String({
      format: 'uri',
      description:
        "The provider's authorization URL to open in a browser. It carries a single-use state that expires after 10 minutes; the provider sends the browser back to <SVC_PUBLIC_URL>/oauth/callback, which completes the sign-in.",
    }),
  },
  { $id: 'SourceConnectResult' },
);
export type SourceConnectResult = Static<typeof SourceConnectResult>;
