-- A kernel database written by the kernel of schema version 2 (wgk at commit af1310b),
-- dumped with sqlite3 iterdump: one task through dispatch, observe-eof, probe-owner,
-- compaction, ack-continuation, ownership-contention and fail, its evidence recorded under
-- the former names eof, probe, ack, contention and terminal-report.
-- tests/test_impl_older_database.py opens it with the current kernel.
BEGIN TRANSACTION;
CREATE TABLE attempts (
    task INTEGER NOT NULL, fence INTEGER NOT NULL,
    generation INTEGER NOT NULL, attempt INTEGER NOT NULL, lease_epoch INTEGER NOT NULL,
    state TEXT NOT NULL, worktree TEXT, origin TEXT, base_hint TEXT, saved_work TEXT,
    imported TEXT, opened_seq INTEGER NOT NULL,
    PRIMARY KEY (task, fence)
) WITHOUT ROWID;
INSERT INTO "attempts" VALUES(1,1,0,1,1,'failed','t1/f1','main-0','main-0',NULL,NULL,3);
CREATE TABLE edges (
    task INTEGER NOT NULL, dep INTEGER NOT NULL, PRIMARY KEY (task, dep)
) WITHOUT ROWID;
CREATE TABLE effects (
    id TEXT PRIMARY KEY, task INTEGER NOT NULL, fence INTEGER NOT NULL,
    version INTEGER NOT NULL, disposition TEXT NOT NULL, candidate TEXT, base TEXT,
    state TEXT NOT NULL, re_observed INTEGER NOT NULL DEFAULT 0,
    prepared_seq INTEGER NOT NULL, settled_seq INTEGER
);
CREATE TABLE evidence (
    task INTEGER NOT NULL, kind TEXT NOT NULL, ident TEXT NOT NULL,
    counted INTEGER NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (task, kind, ident)
) WITHOUT ROWID;
INSERT INTO "evidence" VALUES(1,'ack','occ-1',0,7);
INSERT INTO "evidence" VALUES(1,'compaction','occ-1',0,6);
INSERT INTO "evidence" VALUES(1,'contention','caller-7',0,8);
INSERT INTO "evidence" VALUES(1,'continuation','occ-1',0,6);
INSERT INTO "evidence" VALUES(1,'eof','observer-eof:stream-1',0,4);
INSERT INTO "evidence" VALUES(1,'probe','pid:4001:birth:911',0,5);
INSERT INTO "evidence" VALUES(1,'terminal-report','worker-exit-1',0,9);
CREATE TABLE generations (
    task INTEGER NOT NULL, generation INTEGER NOT NULL, opened_seq INTEGER NOT NULL,
    PRIMARY KEY (task, generation)
) WITHOUT ROWID;
INSERT INTO "generations" VALUES(1,0,2);
CREATE TABLE journal (
    key TEXT PRIMARY KEY, digest TEXT NOT NULL, response TEXT NOT NULL, seq INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO "journal" VALUES('a1','03720f49e0fba9142fddd5d8960cef8d8575559651715c6a5d6f8476a01192e9','{"decision":"applied"}',7);
INSERT INTO "journal" VALUES('c1','9bc41ebc3786733e9a4bf9076ef968324cd70cd1f5f05973db41eb984b7678f8','{"decision":"applied"}',6);
INSERT INTO "journal" VALUES('d1','ee4f6903f251d9f2aa536c045085ebec5faeef50dc7a522fa66e5051db27d8a9','{"decision":"applied"}',3);
INSERT INTO "journal" VALUES('eof1','217c10cb8a49353bbcf722e2fb44d078c32daf574d448d4ca9dada4cab5f295a','{"decision":"evidence-only"}',4);
INSERT INTO "journal" VALUES('f1','3e2569d3ae6fd3e36d0d9680f12d064d4b6f47889336be185a2ec431d30e658c','{"decision":"applied"}',9);
INSERT INTO "journal" VALUES('oc1','3e47efa24900ae6c7ab7c97f1354806528c494979fd17580c344f94ba4be6fe2','{"decision":"evidence-only"}',8);
INSERT INTO "journal" VALUES('probe1','07ab405db0f26bf7f460659b0dfc4aae39dcef3a72c0cb74ab202b5977d1f9cd','{"decision":"evidence-only"}',5);
CREATE TABLE leases (
    task INTEGER NOT NULL, kind TEXT NOT NULL, held INTEGER NOT NULL,
    PRIMARY KEY (task, kind)
) WITHOUT ROWID;
INSERT INTO "leases" VALUES(1,'finish',0);
INSERT INTO "leases" VALUES(1,'session',0);
INSERT INTO "leases" VALUES(1,'worktree',0);
CREATE TABLE ledger (
    seq INTEGER PRIMARY KEY, prev TEXT NOT NULL, hash TEXT NOT NULL, event TEXT NOT NULL,
    task TEXT, key TEXT, body TEXT NOT NULL
);
INSERT INTO "ledger" VALUES(1,'0000000000000000000000000000000000000000000000000000000000000000','c938eeeef4fe01d15b485f9ce397958bcb5d5c70af04cd780b6ad9e88a8ca4dd','graph-created',NULL,NULL,'{"config":{},"graph":"g"}');
INSERT INTO "ledger" VALUES(2,'c938eeeef4fe01d15b485f9ce397958bcb5d5c70af04cd780b6ad9e88a8ca4dd','0c78fb1721f56d5a07cf53b2feb9d7bb5b672c353f6b1e4524d7eb865578695a','task-added','t1',NULL,'{"deps":[],"disposition":"land","requires-assignment":false,"review-required":false,"task":"t1"}');
INSERT INTO "ledger" VALUES(3,'0c78fb1721f56d5a07cf53b2feb9d7bb5b672c353f6b1e4524d7eb865578695a','627b8297826e031f6b309f16ff86688e39d8eba6bdbb99f1a976766ad09f5489','request','t1','d1','{"request":{"actor":"daemon","expected-attempt":0,"kind":"dispatch","owner":{"birth":911,"child-epoch":1,"pid":4001,"session":"s1","wrapper-epoch":1},"task":"t1"},"changes":{"attempt":1,"attempt_state":"running","base_hint":"main-0","child_epoch":1,"fence":1,"lease_epoch":1,"origin":"main-0","owner_birth":911,"owner_pid":4001,"session":"s1","session_lease":true,"worktree_id":"t1/f1","worktree_lease":true,"wrapper_epoch":1},"digest":"ee4f6903f251d9f2aa536c045085ebec5faeef50dc7a522fa66e5051db27d8a9","facts":[["worktree-added",{"fence":1,"origin":"main-0","path":null,"worktree":"t1/f1"}]],"observed":{"target":"main-0"},"response":{"decision":"applied"}}');
INSERT INTO "ledger" VALUES(4,'627b8297826e031f6b309f16ff86688e39d8eba6bdbb99f1a976766ad09f5489','7a96fee6519a16cdea2127d5ffe68f137787e9f85a22f326efae2bb7e75e56ee','request','t1','eof1','{"request":{"actor":"wrapper","cap":{"attempt":1,"fence":1,"generation":0,"graph":"g","lease-epoch":1,"task":"t1"},"evidence":"observer-eof:stream-1","kind":"observe-eof","task":"t1"},"changes":{"owner_seen":"suspect"},"digest":"217c10cb8a49353bbcf722e2fb44d078c32daf574d448d4ca9dada4cab5f295a","facts":[["evidence",{"counted":false,"id":"observer-eof:stream-1","kind":"eof"}]],"response":{"decision":"evidence-only"}}');
INSERT INTO "ledger" VALUES(5,'7a96fee6519a16cdea2127d5ffe68f137787e9f85a22f326efae2bb7e75e56ee','b409c3a5ab42a7e79cde6bc829e855b3b2e496e1a2795127705a2309865813c9','request','t1','probe1','{"request":{"actor":"process-observer","cap":{"attempt":1,"fence":1,"generation":0,"graph":"g","lease-epoch":1,"task":"t1"},"evidence":"pid:4001:birth:911","kind":"probe-owner","task":"t1"},"changes":{"owner_seen":"live"},"digest":"07ab405db0f26bf7f460659b0dfc4aae39dcef3a72c0cb74ab202b5977d1f9cd","facts":[["evidence",{"counted":false,"id":"pid:4001:birth:911","kind":"probe"}]],"observed":{"birth":911},"response":{"decision":"evidence-only"}}');
INSERT INTO "ledger" VALUES(6,'b409c3a5ab42a7e79cde6bc829e855b3b2e496e1a2795127705a2309865813c9','0ea070c42b3a007027175c4d51759b85f0c924a4c77286a8d3e43c53685168f0','request','t1','c1','{"request":{"actor":"wrapper","cap":{"attempt":1,"fence":1,"generation":0,"graph":"g","lease-epoch":1,"task":"t1"},"evidence":"occ-1","kind":"compaction","task":"t1"},"changes":{},"digest":"9bc41ebc3786733e9a4bf9076ef968324cd70cd1f5f05973db41eb984b7678f8","facts":[["evidence",{"counted":false,"id":"occ-1","kind":"compaction"}],["evidence",{"counted":false,"id":"occ-1","kind":"continuation"}]],"response":{"decision":"applied"}}');
INSERT INTO "ledger" VALUES(7,'0ea070c42b3a007027175c4d51759b85f0c924a4c77286a8d3e43c53685168f0','91828c16cd038bb3d6969a7f3f69537afbe61343cc731329b51d0620320d0ac8','request','t1','a1','{"request":{"actor":"wrapper","cap":{"attempt":1,"fence":1,"generation":0,"graph":"g","lease-epoch":1,"task":"t1"},"evidence":"occ-1","kind":"ack-continuation","task":"t1"},"changes":{},"digest":"03720f49e0fba9142fddd5d8960cef8d8575559651715c6a5d6f8476a01192e9","facts":[["evidence",{"counted":false,"id":"occ-1","kind":"ack"}]],"response":{"decision":"applied"}}');
INSERT INTO "ledger" VALUES(8,'91828c16cd038bb3d6969a7f3f69537afbe61343cc731329b51d0620320d0ac8','5cf23072005cd6274e7e56b739003d53702d3de2863a76c3f6c5d799a1136e40','request','t1','oc1','{"request":{"actor":"operator","evidence":"caller-7","kind":"ownership-contention","task":"t1"},"changes":{},"digest":"3e47efa24900ae6c7ab7c97f1354806528c494979fd17580c344f94ba4be6fe2","facts":[["evidence",{"counted":false,"id":"caller-7","kind":"contention"}]],"response":{"decision":"evidence-only"}}');
INSERT INTO "ledger" VALUES(9,'5cf23072005cd6274e7e56b739003d53702d3de2863a76c3f6c5d799a1136e40','3d63e26f83aa633f076670cbbfa155f2c2aaac24ecb55b3413e43e192134e5fa','request','t1','f1','{"request":{"actor":"worker","cap":{"attempt":1,"fence":1,"generation":0,"graph":"g","lease-epoch":1,"task":"t1"},"evidence":"worker-exit-1","kind":"fail","task":"t1"},"changes":{"attempt_state":"failed","child_epoch":0,"owner_birth":0,"owner_pid":0,"owner_seen":"unverified","session":null,"session_lease":false,"worktree_lease":false,"wrapper_epoch":0},"digest":"3e2569d3ae6fd3e36d0d9680f12d064d4b6f47889336be185a2ec431d30e658c","facts":[["evidence",{"counted":false,"id":"worker-exit-1","kind":"terminal-report"}]],"observed":{"worktree":{"content":"main-0","present":true}},"response":{"decision":"applied"}}');
CREATE TABLE legacy_records (
    id INTEGER PRIMARY KEY, task TEXT NOT NULL, source TEXT NOT NULL, line INTEGER NOT NULL,
    original BLOB NOT NULL, legacy_status TEXT NOT NULL, seq INTEGER NOT NULL
);
CREATE TABLE logs (seq INTEGER PRIMARY KEY, task INTEGER NOT NULL);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO "meta" VALUES('schema-version','2');
INSERT INTO "meta" VALUES('graph-id','g');
CREATE TABLE owners (
    task INTEGER NOT NULL, fence INTEGER NOT NULL,
    pid INTEGER NOT NULL, birth INTEGER NOT NULL, session TEXT,
    wrapper_epoch INTEGER NOT NULL, child_epoch INTEGER NOT NULL, seen TEXT NOT NULL,
    PRIMARY KEY (task, fence)
) WITHOUT ROWID;
INSERT INTO "owners" VALUES(1,1,0,0,NULL,0,0,'unverified');
CREATE TABLE pins (ref TEXT PRIMARY KEY, task INTEGER NOT NULL, content TEXT NOT NULL,
                   seq INTEGER NOT NULL);
CREATE TABLE receipts (
    task INTEGER NOT NULL, kind TEXT NOT NULL,
    fence INTEGER NOT NULL, candidate TEXT, base TEXT,
    PRIMARY KEY (task, kind)
) WITHOUT ROWID;
CREATE TABLE task_view (
    task INTEGER PRIMARY KEY, status TEXT NOT NULL, satisfied INTEGER NOT NULL,
    pending INTEGER NOT NULL
);
INSERT INTO "task_view" VALUES(1,'open',0,0);
CREATE TABLE tasks (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    review_required INTEGER NOT NULL DEFAULT 0,
    requires_assignment INTEGER NOT NULL DEFAULT 0,
    disposition_policy TEXT NOT NULL DEFAULT 'land',
    generation INTEGER NOT NULL DEFAULT 0,
    attempt INTEGER NOT NULL DEFAULT 0,
    fence INTEGER NOT NULL DEFAULT 0,
    lease_epoch INTEGER NOT NULL DEFAULT 0,
    retained TEXT,
    retained_base TEXT,
    deadline INTEGER NOT NULL DEFAULT 0,
    assigned INTEGER NOT NULL DEFAULT 0,
    legacy_done INTEGER NOT NULL DEFAULT 0,
    reconstructed INTEGER NOT NULL DEFAULT 0,
    abandoned INTEGER NOT NULL DEFAULT 0
);
INSERT INTO "tasks" VALUES(1,'t1',0,0,'land',0,1,1,1,NULL,NULL,0,0,0,0,0);
CREATE TABLE transactions (
    task INTEGER PRIMARY KEY,
    fence INTEGER NOT NULL DEFAULT 0,
    phase TEXT NOT NULL DEFAULT 'absent',
    exit TEXT NOT NULL DEFAULT 'none',
    reason TEXT NOT NULL DEFAULT 'none',
    revision INTEGER NOT NULL DEFAULT 0,
    candidate TEXT, base TEXT,
    version INTEGER NOT NULL DEFAULT 0,
    disposition TEXT NOT NULL DEFAULT 'none',
    effect_done INTEGER NOT NULL DEFAULT 0
);
INSERT INTO "transactions" VALUES(1,1,'absent','none','none',0,NULL,NULL,0,'none',0);
CREATE TABLE worktrees (
    id TEXT PRIMARY KEY, task INTEGER NOT NULL, fence INTEGER NOT NULL,
    origin TEXT, path TEXT, planned_removal INTEGER NOT NULL DEFAULT 0,
    removed INTEGER NOT NULL DEFAULT 0, last_content TEXT
);
INSERT INTO "worktrees" VALUES('t1/f1',1,1,'main-0',NULL,0,0,'main-0');
CREATE INDEX edges_by_dep ON edges (dep, task);
CREATE INDEX task_view_ready ON task_view (status, pending);
COMMIT;
