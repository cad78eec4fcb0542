-- watcher_cursor_swap: store `p_new` as the watcher cursor of `p_chain` if it still is `p_old`
-- (an empty array: the chain has no cursor yet), else raise no_data_found (P0002): another step
-- moved it since `p_old` was read. A compare-and-set, so that a watcher which recorded a scan
-- planned ahead (deposits/scans.py, record_planned) needs no locking read of the cursor first,
-- and a step that read a stale cursor cannot overwrite a newer one: its whole transaction
-- fails instead (it is sent in one pipeline with its COMMIT).

CREATE OR REPLACE FUNCTION watcher_cursor_swap(p_chain text, p_old jsonb, p_new jsonb)
  RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF p_old = '[]'::jsonb THEN
    INSERT INTO watcher_cursors (chain, recent) VALUES (p_chain, p_new)
    ON CONFLICT (chain) DO NOTHING;
  ELSE
    UPDATE watcher_cursors SET recent = p_new, updated_at = now()
     WHERE chain = p_chain AND recent = p_old;
  END IF;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'the watcher cursor of % moved since it was read', p_chain
      USING ERRCODE = 'no_data_found';
  END IF;
END
$$;
