-- row_refuse_id_change: a BEFORE UPDATE OF id trigger function that refuses changing a row's id
-- (foreign_key_violation), for the money tables whose id custody_app may "update"
-- (revision 0030_money_table_grants: a column grant of UPDATE (id) only, so that it can lock
-- rows with SELECT ... FOR UPDATE, which PostgreSQL allows only with some UPDATE right).

CREATE OR REPLACE FUNCTION row_refuse_id_change() RETURNS trigger
LANGUAGE plpgsql
SET search_path = public, pg_temp
AS $fn$
BEGIN
  RAISE EXCEPTION '% %: its id cannot change (other rows name it)', TG_TABLE_NAME, OLD.id
    USING ERRCODE = 'foreign_key_violation';
END
$fn$;
COMMENT ON FUNCTION row_refuse_id_change() IS
  'Trigger function: refuse changing the id of a money table''s row.';
