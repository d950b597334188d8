-- OAuth for sources (authType `oauth`): what a source's sign-in left behind, and the pending
-- sign-ins the callback completes.

-- One row per source that has been connected (or is being connected) with OAuth. `sealed` is
-- one AES-GCM value bound to the organization and source (see domain/source-oauth.ts): the
-- client registration (dynamic, or the operator's client id), the discovered metadata and the
-- tokens. Nothing secret is stored outside it. `status`: `connected` (tokens usable),
-- `expired` (the refresh failed: the source needs a new sign-in). `version` grows with each
-- write of new tokens, so that two runs refreshing at once cannot overwrite newer tokens.
CREATE TABLE source_oauth (
  source_id uuid PRIMARY KEY REFERENCES sources (id) ON DELETE CASCADE,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  sealed text NOT NULL,
  status text NOT NULL CHECK (status IN ('connected', 'expired')),
  -- When the access token stops working (null: the server did not say).
  access_expires_at timestamptz,
  version integer NOT NULL DEFAULT 1,
  -- Why the source became expired (safe to show: no secret).
  failure text,
  -- One refresh at a time per source, across processes: a provider that rotates refresh tokens
  -- refuses the second use of one, which must not expire a sign-in another run just renewed.
  refresh_lease_until timestamptz,
  updated_at timestamptz NOT NULL
);

-- A sign-in started and not finished: the SHA-256 of its `state` (the value itself only travels
-- to the browser), bound to one organization and source, single-use (deleted by the callback
-- that reads it) and short-lived. `sealed` holds the PKCE code verifier and the client and
-- metadata the flow discovered, sealed for this state.
CREATE TABLE source_oauth_states (
  state_hash text PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  source_id uuid NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
  sealed text NOT NULL,
  expires_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL
);
CREATE INDEX source_oauth_states_source_idx ON source_oauth_states (source_id);
CREATE INDEX source_oauth_states_expiry_idx ON source_oauth_states (expires_at);

-- A source whose sign-in ran out tells the destinations of the task whose run found it out.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_kind_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_kind_check
  CHECK (kind IN ('run', 'task.paused', 'task.cost_limit_reached', 'source.disconnected'));
