-- Writers publish their own outbox rows right after commit (the courier); the
-- relay only polls for rows left behind. A NOTIFY per insert would wake it for
-- rows it must leave alone, and NOTIFY serialises every committing writer on
-- one global queue lock.
DROP TRIGGER IF EXISTS outbox_notify ON outbox;
DROP FUNCTION IF EXISTS outbox_notify();
