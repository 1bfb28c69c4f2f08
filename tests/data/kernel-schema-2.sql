BEGIN TRANSACTION;
CREATE TABLE attempts (
    task INTEGER NOT NULL, fence INTEGER NOT NULL,
    generation INTEGER NOT NULL, attempt INTEGER NOT NULL, lease_epoch INTEGER NOT NULL,
    state TEXT NOT NULL, worktree TEXT, origin TEXT, base_hint TEXT, saved_work TEXT,
    imported TEXT, opened_seq INTEGER NOT NULL,
    PRIMARY KEY (task, fence)
) WITHOUT ROWID;
INSERT INTO "attempts" VALUES(1,1,0,1,1,'running','a/f1','main-0','main-0',NULL,NULL,4);
CREATE TABLE edges (
    task INTEGER NOT NULL, dep INTEGER NOT NULL, PRIMARY KEY (task, dep)
) WITHOUT ROWID;
INSERT INTO "edges" VALUES(2,1);
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
INSERT INTO "evidence" VALUES(1,'heartbeat','hb-1',0,5);
INSERT INTO "evidence" VALUES(2,'message','hello',0,6);
CREATE TABLE generations (
    task INTEGER NOT NULL, generation INTEGER NOT NULL, opened_seq INTEGER NOT NULL,
    PRIMARY KEY (task, generation)
) WITHOUT ROWID;
INSERT INTO "generations" VALUES(1,0,2);
INSERT INTO "generations" VALUES(2,0,3);
CREATE TABLE journal (
    key TEXT PRIMARY KEY, digest TEXT NOT NULL, response TEXT NOT NULL, seq INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO "journal" VALUES('d-a','ea7bd2acd2978ae1caa8d655afbc2795df2e7ff841cc2277a9a8276d4552d1e4','{"decision":"applied"}',4);
INSERT INTO "journal" VALUES('hb-1','21bc856ceeaaba9c0260dda586161cf33b439cbe712dc7b05ebaf4768b10dbb8','{"decision":"evidence-only"}',5);
INSERT INTO "journal" VALUES('m-1','66284ac66c6c22e231a874d92afca82fabc74ca6473506f8e8887150c420ea72','{"decision":"evidence-only"}',6);
INSERT INTO "journal" VALUES('stale','04132f6c63decdab4b8fac356ec07b77af52bddd6c11ee3ca8892307df51b410','{"code":"stale-capability","decision":"rejected"}',7);
CREATE TABLE leases (
    task INTEGER NOT NULL, kind TEXT NOT NULL, held INTEGER NOT NULL,
    PRIMARY KEY (task, kind)
) WITHOUT ROWID;
INSERT INTO "leases" VALUES(1,'finish',0);
INSERT INTO "leases" VALUES(1,'session',1);
INSERT INTO "leases" VALUES(1,'worktree',1);
INSERT INTO "leases" VALUES(2,'finish',0);
INSERT INTO "leases" VALUES(2,'session',0);
INSERT INTO "leases" VALUES(2,'worktree',0);
CREATE TABLE ledger (
    seq INTEGER PRIMARY KEY, prev TEXT NOT NULL, hash TEXT NOT NULL, event TEXT NOT NULL,
    task TEXT, key TEXT, body TEXT NOT NULL
);
INSERT INTO "ledger" VALUES(1,'0000000000000000000000000000000000000000000000000000000000000000','c938eeeef4fe01d15b485f9ce397958bcb5d5c70af04cd780b6ad9e88a8ca4dd','graph-created',NULL,NULL,'{"config":{},"graph":"g"}');
INSERT INTO "ledger" VALUES(2,'c938eeeef4fe01d15b485f9ce397958bcb5d5c70af04cd780b6ad9e88a8ca4dd','21345205938f80a46ee1170f1b0788b6b8624354e6a5d4f1005e9686f71f7147','task-added','a',NULL,'{"deps":[],"disposition":"land","requires-assignment":false,"review-required":false,"task":"a"}');
INSERT INTO "ledger" VALUES(3,'21345205938f80a46ee1170f1b0788b6b8624354e6a5d4f1005e9686f71f7147','b51160a0e24bf5002dd5aac5a4de07e55221bfaefc55a1a9f3643dd467d2daa6','task-added','b',NULL,'{"deps":["a"],"disposition":"land","requires-assignment":false,"review-required":false,"task":"b"}');
INSERT INTO "ledger" VALUES(4,'b51160a0e24bf5002dd5aac5a4de07e55221bfaefc55a1a9f3643dd467d2daa6','aea742aab1cec4cb49c3f2d151dc520ff7d551a97daa763e246f69faf9625983','request','a','d-a','{"request":{"actor":"daemon","expected-attempt":0,"kind":"dispatch","owner":{"birth":911,"child-epoch":1,"pid":4001,"session":"s1","wrapper-epoch":1},"task":"a"},"changes":{"attempt":1,"attempt_state":"running","base_hint":"main-0","child_epoch":1,"fence":1,"lease_epoch":1,"origin":"main-0","owner_birth":911,"owner_pid":4001,"session":"s1","session_lease":true,"worktree_id":"a/f1","worktree_lease":true,"wrapper_epoch":1},"digest":"ea7bd2acd2978ae1caa8d655afbc2795df2e7ff841cc2277a9a8276d4552d1e4","facts":[["worktree-added",{"fence":1,"origin":"main-0","path":null,"worktree":"a/f1"}]],"observed":{"target":"main-0"},"response":{"decision":"applied"}}');
INSERT INTO "ledger" VALUES(5,'aea742aab1cec4cb49c3f2d151dc520ff7d551a97daa763e246f69faf9625983','fb668b4f29ba8cb8c5713bcf4f32b6533fef4cd7ada0d3dce994657df6138f7e','request','a','hb-1','{"request":{"actor":"worker","cap":{"attempt":1,"fence":1,"generation":0,"graph":"g","lease-epoch":1,"task":"a"},"evidence":"hb-1","kind":"heartbeat","task":"a"},"changes":{},"digest":"21bc856ceeaaba9c0260dda586161cf33b439cbe712dc7b05ebaf4768b10dbb8","facts":[["evidence",{"counted":false,"id":"hb-1","kind":"heartbeat"}]],"response":{"decision":"evidence-only"}}');
INSERT INTO "ledger" VALUES(6,'fb668b4f29ba8cb8c5713bcf4f32b6533fef4cd7ada0d3dce994657df6138f7e','c4548a09e678348dfc9f6184089e0c7f216f346d41e76e784bf492b5be4abf80','request','b','m-1','{"request":{"actor":"operator","evidence":"hello","kind":"message","task":"b"},"changes":{},"digest":"66284ac66c6c22e231a874d92afca82fabc74ca6473506f8e8887150c420ea72","facts":[["evidence",{"counted":false,"id":"hello","kind":"message"}]],"response":{"decision":"evidence-only"}}');
INSERT INTO "ledger" VALUES(7,'c4548a09e678348dfc9f6184089e0c7f216f346d41e76e784bf492b5be4abf80','79fcce0b761a7c9ea228486f86700b1a221650c608246dc8e059e00bca1533f2','request','a','stale','{"request":{"actor":"worker","cap":{"attempt":1,"fence":9,"generation":0,"graph":"g","lease-epoch":1,"task":"a"},"kind":"fail","task":"a"},"digest":"04132f6c63decdab4b8fac356ec07b77af52bddd6c11ee3ca8892307df51b410","response":{"code":"stale-capability","decision":"rejected"}}');
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
INSERT INTO "owners" VALUES(1,1,4001,911,'s1',1,1,'unverified');
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
INSERT INTO "task_view" VALUES(1,'in-progress',0,0);
INSERT INTO "task_view" VALUES(2,'open',0,1);
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
INSERT INTO "tasks" VALUES(1,'a',0,0,'land',0,1,1,1,NULL,NULL,0,0,0,0,0);
INSERT INTO "tasks" VALUES(2,'b',0,0,'land',0,0,0,0,NULL,NULL,0,0,0,0,0);
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
INSERT INTO "transactions" VALUES(2,0,'absent','none','none',0,NULL,NULL,0,'none',0);
CREATE TABLE worktrees (
    id TEXT PRIMARY KEY, task INTEGER NOT NULL, fence INTEGER NOT NULL,
    origin TEXT, path TEXT, planned_removal INTEGER NOT NULL DEFAULT 0,
    removed INTEGER NOT NULL DEFAULT 0, last_content TEXT
);
INSERT INTO "worktrees" VALUES('a/f1',1,1,'main-0',NULL,0,0,'main-0');
CREATE INDEX edges_by_dep ON edges (dep, task);
CREATE INDEX task_view_ready ON task_view (status, pending);
COMMIT;
