-- People: users of organizations, their sign-in sessions, invitations of further members, and
-- the user who created each API key.

CREATE TABLE users (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  -- Trimmed and lower-cased by the service; one account per e-mail across the whole service.
  email text NOT NULL UNIQUE CHECK (length(email) BETWEEN 3 AND 320 AND email = lower(email)),
  name text CHECK (length(name) BETWEEN 1 AND 255),
  -- scrypt$N$r$p$salt$hash (src/lib/password.ts); never the password.
  password_hash text NOT NULL,
  role text NOT NULL CHECK (role IN ('owner', 'member')),
  created_at timestamptz NOT NULL,
  last_sign_in_at timestamptz
);
CREATE INDEX users_organization_idx ON users (organization_id, created_at, id);

CREATE TABLE user_sessions (
  -- Only a SHA-256 (hex) of the session token is kept; the token itself lives in the cookie.
  id_hash text PRIMARY KEY,
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  csrf_token text NOT NULL,
  created_at timestamptz NOT NULL,
  -- Sliding: moved on (with last_seen_at) at most once a minute while the session is used.
  expires_at timestamptz NOT NULL,
  last_seen_at timestamptz NOT NULL
);
CREATE INDEX user_sessions_user_idx ON user_sessions (user_id);
CREATE INDEX user_sessions_expires_idx ON user_sessions (expires_at);

CREATE TABLE invitations (
  -- Only a SHA-256 (hex) of the invitation token is kept; the token is in the invitation link.
  token_hash text PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  email text NOT NULL CHECK (length(email) BETWEEN 3 AND 320 AND email = lower(email)),
  role text NOT NULL DEFAULT 'member' CHECK (role = 'member'),
  invited_by uuid REFERENCES users (id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  accepted_at timestamptz
);
-- Pending invitations of an organization (counted against usersLimit, listed, replaced per e-mail).
CREATE INDEX invitations_pending_idx ON invitations (organization_id, email) WHERE accepted_at IS NULL;

ALTER TABLE api_keys ADD COLUMN created_by_user_id uuid REFERENCES users (id) ON DELETE SET NULL;
-- Deleting a user sets its keys' creator to null: found through this index.
CREATE INDEX api_keys_created_by_idx ON api_keys (created_by_user_id) WHERE created_by_user_id IS NOT NULL;
