-- 0009_grab_flow_early: CANCELs that came before their GRAB (a GRAB dead-lettered and
-- replayed later, or the two on different partitions after the flow topic gained
-- partitions). store.InsertFlows keeps such a CANCEL here rather than drop it, and
-- moves it into grab_flow, netted, in the transaction that writes its GRAB. A
-- rollback's CANCEL whose GRAB never reached the record stays here, moving nothing.
-- Its columns are grab_flow's: a later ALTER of grab_flow alters this table too.

CREATE TABLE IF NOT EXISTS grab_flow_early LIKE grab_flow;
