-- One fence row per election kind. 'lease' (the store's own lease) starts afresh: its lease row
-- fences it too. 'epoch' (etcd revisions, Redis counters) keeps what the single row held.
INSERT INTO fence (name, max_epoch) VALUES ('lease', 0);
INSERT INTO fence (name, max_epoch) SELECT 'epoch', max_epoch FROM fence WHERE name = 'scheduler';
