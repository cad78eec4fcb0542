-- Hot/cold limits (issue 14). The hot wallet of each (chain, asset) is kept between a minimum
-- and a maximum ([sweeps] hot_min, hot_max): above the maximum the excess is proposed as a
-- transfer to cold, which an admin approves (two different admins above
-- cold_dual_approval_above) before it is signed; below the minimum an alert asks for a refill
-- from cold, and a refill request lets the watcher recognise the incoming transfer as ours.

-- At most one cold transfer in flight per (chain, asset): the check that proposes the excess,
-- an admin proposing by hand, or both at once, cannot put two on the way (the second insert
-- finds this index and writes nothing). Terminal states are the model's TERMINAL.
CREATE UNIQUE INDEX cold_transfers_one_open ON cold_transfers (chain, asset)
  WHERE state NOT IN ('final', 'reverted', 'dropped', 'rejected');

-- The proposer's own request key (an admin's Idempotency-Key or the CLI's --key): the same
-- request again finds its first proposal instead of proposing twice. NULL for proposals of
-- the hot-limit check.
ALTER TABLE cold_transfers ADD COLUMN request_key text UNIQUE
  CHECK (length(request_key) BETWEEN 1 AND 300);
COMMENT ON COLUMN cold_transfers.request_key IS
  'The proposer''s request key (api:<client>:<Idempotency-Key> or cli:<key>); NULL for a '
  'proposal of the hot-limit check. The same key again returns the first proposal.';
ALTER TABLE refill_requests ADD COLUMN request_key text UNIQUE
  CHECK (length(request_key) BETWEEN 1 AND 300);
COMMENT ON COLUMN refill_requests.request_key IS
  'The requester''s request key (api:<client>:<Idempotency-Key> or cli:<key>); NULL for a '
  'request of the hot-limit check. The same key again returns the first request.';

-- An episode: the stretch of time during which a hot wallet's holding of an asset is outside
-- one of its limits, from the check that first saw it outside to the one that saw it back.
-- An alert is raised once per episode; a refill request is created once per low episode; an
-- automatic proposal rejected by an admin is not proposed again in the same high episode.
CREATE TABLE hot_limit_episodes (
  id                 bigserial PRIMARY KEY,
  chain              text NOT NULL,
  asset              text NOT NULL,
  side               text NOT NULL CHECK (side IN ('above_max', 'below_min')),
  hot_wallet         text NOT NULL CHECK (hot_wallet ~ '^0x[0-9a-f]{40}$'),
  limit_amount       numeric(78, 0) NOT NULL CHECK (limit_amount >= 0),
  holding            numeric(78, 0) NOT NULL,
  finalized_block    bigint NOT NULL CHECK (finalized_block >= 0),
  refill_request_id  bigint REFERENCES refill_requests (id),
  started_at         timestamptz NOT NULL,
  ended_at           timestamptz,
  ended_holding      numeric(78, 0),
  CHECK ((ended_at IS NULL) = (ended_holding IS NULL)),
  CHECK (ended_at IS NULL OR ended_at >= started_at),
  CHECK (refill_request_id IS NULL OR side = 'below_min')
);
COMMENT ON TABLE hot_limit_episodes IS
  'A stretch of time during which the hot wallet''s holding of an asset was above its maximum '
  'or below its minimum (amounts in the chain''s smallest unit: limit_amount the limit, '
  'holding what the check that opened it computed: the smaller of the balances at the '
  'finalized and the latest block, less the outgoing movements not yet included). '
  'refill_request_id: the refill request created for a low episode.';
CREATE UNIQUE INDEX hot_limit_episodes_one_open ON hot_limit_episodes (chain, asset, side)
  WHERE ended_at IS NULL;

REVOKE ALL ON hot_limit_episodes FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE ON hot_limit_episodes TO custody_app;
GRANT USAGE ON SEQUENCE hot_limit_episodes_id_seq TO custody_app;
