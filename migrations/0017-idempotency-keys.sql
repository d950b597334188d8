-- Idempotency keys: a POST under /api/svc sent with an Idempotency-Key header is recorded here
-- per organization before its handler runs (in flight: answer columns null, a lease in
-- locked_until, the reserving request's owner token), then completed with the answer it got,
-- which a retry with the same key and the same request gets again for 24 hours.
CREATE TABLE idempotency_keys (
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  key text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
  -- sha256 (hex) of the method, the path with its query, and the body's canonical JSON.
  request_hash text NOT NULL,
  created_at timestamptz NOT NULL,
  -- While in flight: until when the reserving request holds the key (a crashed process's
  -- reservation is taken over after it), and a token only that request knows.
  locked_until timestamptz,
  owner text NOT NULL,
  -- Once completed: the answer replayed.
  status_code integer,
  response_headers jsonb,
  response_body text,
  PRIMARY KEY (organization_id, key)
);

-- The housekeeping loop deletes keys older than 24 hours.
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
