-- An Idempotency-Key record names the request it was first used for (method and path), so that
-- a different request under the same key is refused with a problem that says which request
-- the key already belongs to (api.idempotency). Records stored before this have neither.

ALTER TABLE api_idempotency
    ADD COLUMN method text CHECK (method ~ '^[A-Z]{1,10}$'),
    ADD COLUMN path text CHECK (length(path) BETWEEN 1 AND 2000);
COMMENT ON COLUMN api_idempotency.method IS
  'HTTP method of the request first sent with the key (null: stored before 0027).';
COMMENT ON COLUMN api_idempotency.path IS
  'Path of the request first sent with the key (null: stored before 0027).';
