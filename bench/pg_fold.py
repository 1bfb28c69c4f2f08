"""What folding a PostgreSQL request's second round trip into few statements changes, side by
side in one run: the kernel as it is against the same kernel whose COMMIT round trip sends
each run of writes (the ledger append, the evidence number, the journal row, the record's
rows) as one writable CTE (``folding`` below), beside the raw psycopg loop; then the same
question without the kernel, on three writes of one transaction sent as three statements,
as one writable CTE and as one PL/pgSQL function, and the cost of a function's own settings
(``SET`` clauses, as the lock function carries).

    python bench/pg_fold.py                       # 40 rounds of 13 requests per column
    python bench/pg_fold.py --rounds 80 --micro 2000 --json

The server is ``WGK_BENCH_POSTGRES`` (else ``WGK_TEST_POSTGRES``); each column runs in a
schema of its own, dropped afterwards. Per column: durable requests/s, the ratio to the raw
loop, the client's CPU per request, the server process's (``/proc``: the server on this
host) and the statements and round trips per request. Each kernel column checks what it
wrote: every journal row's number is its ledger event's, every heartbeat's evidence row
carries its event's number, the chain verifies. Measured, the fold saved no server CPU on
heartbeats and about 2 % on completions (``README.md``): the kernel does not fold.
Writes ``bench/results/pg-fold-<date>.json``.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_pg import RawPg, Schema, backend_cpu, server  # noqa: E402
from gate_against import BENCH  # noqa: E402
from pg_against import alternated, measured  # noqa: E402
from impl_workloads import Completions, Heartbeats  # noqa: E402

from wgk.impl import Pragmas  # noqa: E402
from wgk.impl.storage import pg, pg_sql  # noqa: E402
from wgk.impl.storage.pg_text import Queued, Result  # noqa: E402

# --- the fold (measured here; the kernel sends each statement on its own) ------------------

_WRITE = re.compile(r"\s*(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(\w+)", re.I)
_READ = re.compile(r"\b(?:FROM|JOIN)\s+(\w+)", re.I)


def runs(texts: tuple) -> list[tuple[int, int, str, bool]]:
    """The runs of a COMMIT's statements (None: one without parameters) that may share one
    statement: (first, past the last, the writable CTE, whether a ledger append heads it).
    A run starts at an append or any other write and takes the writes after it while none
    writes a table another of the run reads or writes (one CTE's statements share one
    snapshot; two updates of one row in one statement are undefined), none returns rows
    and none is another append; after an append heading it, ``currval`` is its number."""
    out, start, written, read = [], 0, set(), set()

    def close(end: int) -> None:
        if end - start > 1:
            out.append((start, end, *_cte(texts[start:end])))

    for n, text in enumerate(texts):
        m = None if text is None else _WRITE.match(text)
        is_append = text == pg_sql.APPEND
        if m is None or ("RETURNING" in text.upper() and not is_append):
            close(n)
            start, written, read = n + 1, set(), set()
            continue
        table, reads = m.group(1).lower(), {t.lower() for t in _READ.findall(text)}
        if is_append or table in written or table in read or reads & written:
            close(n)
            start, written, read = n, set(), set()
        written.add(table)
        read |= reads
    close(len(texts))
    return out


def _cte(texts: tuple) -> tuple[str, bool]:
    head = texts[0] == pg_sql.APPEND
    rest = [t.replace(pg_sql.CURRENT_SEQ, "(SELECT seq FROM a)") if head else t
            for t in texts[1:]]
    if head:
        ctes = [f"a AS ({texts[0]})"] + [f"w{n} AS ({t})" for n, t in enumerate(rest, 1)]
        return "WITH " + ", ".join(ctes) + " SELECT seq FROM a", True
    ctes = [f"w{n} AS ({t})" for n, t in enumerate(texts[:-1])]
    return "WITH " + ", ".join(ctes) + " " + texts[-1], False


def folding(conn) -> None:
    """From now on, ``conn`` (a ``PgConnection``) folds the writes of each COMMIT's round
    trip (``runs``, found once per sequence of statements); a folded write's result has no
    row count (-1: nothing reads it after COMMIT)."""
    plain, found = conn.sync, {}

    def sync() -> None:
        queue = conn.queue
        if not queue or queue[-1].sql != "COMMIT":
            return plain()
        texts = tuple(q.sql if q.params is not None else None for q in queue)
        if texts not in found:
            found[texts] = runs(texts)
        out, at, folds = [], 0, []
        for start, end, text, head in found[texts]:
            out += queue[at:start]
            f = Queued(text, [p for q in queue[start:end] for p in q.params])
            folds.append((f, queue[start:end], head))
            out.append(f)
            at = end
        conn.queue = out + queue[at:]
        plain()
        for f, members, head in folds:          # (an error was raised: nothing to hand out)
            for n, q in enumerate(members):
                q.cur = f.cur if head and n == 0 else Result([], -1, None)

    conn.sync = sync


def statements(conn) -> list[int]:
    """Counts the statements ``conn`` sends: a one-item list kept up to date."""
    plain, count = conn.sync, [0]

    def sync() -> None:
        count[0] += len(conn.queue)
        plain()
    conn.sync = sync
    return count


def check(kernel) -> None:
    """What a column wrote holds together: the journal's and the evidence's numbers are their
    events', and the chain verifies."""
    c = kernel.store.conn.raw
    wrong = c.execute("SELECT count(*) FROM journal j LEFT JOIN ledger l ON l.seq = j.seq "
                      "WHERE l.key IS DISTINCT FROM j.key").fetchone()[0]
    unnumbered = c.execute("SELECT count(*) FROM evidence e LEFT JOIN ledger l ON l.seq = e.seq "
                           "WHERE e.kind = 'heartbeat' AND position('\"evidence\":\"' || "
                           "e.ident || '\"' IN coalesce(l.body, '')) = 0").fetchone()[0]
    assert wrong == 0 and unnumbered == 0, (wrong, unnumbered)
    assert kernel.verify_ledger().ok


# --- the kernel's columns -------------------------------------------------------------------------


#: rounds run before the measured ones (a prepared statement's first five runs are planned
#: each time)
WARM = 6


def kernel_rounds(dsn: str, n_rounds: int, batch: int) -> dict:
    with contextlib.ExitStack() as schemas:
        def fresh() -> str:
            return schemas.enter_context(Schema(dsn))
        columns = {"raw": RawPg(fresh())}
        for cls, short in ((Heartbeats, "heartbeats"), (Completions, "completion")):
            for label in ("as is", "folded"):
                column = columns[f"{short} {label}"] = cls(fresh(), Pragmas())
        sent = {n: statements(c.kernel.store.conn) for n, c in columns.items() if n != "raw"}
        for name in sent:
            if name.endswith(" folded"):
                folding(columns[name].kernel.store.conn)     # (counted as they go out)
        for column in columns.values():
            for _ in range(WARM):                  # prepared statements on their generic plans
                column.run(batch)
        names = list(columns)
        conns = {n: c.conn if n == "raw" else c.kernel.store.conn.raw for n, c in columns.items()}
        server0 = {n: backend_cpu(c) for n, c in conns.items()}
        sent0 = {n: s[0] for n, s in sent.items()}
        trips0 = {n: columns[n].kernel.store.conn.round_trips for n in sent}
        wall, cpu = alternated(columns, n_rounds, batch)
        n = n_rounds * batch
        out = {}
        for name in names:
            f = measured(name, wall, cpu, n, conns, server0)
            if name != "raw":
                f["statements"] = (sent[name][0] - sent0[name]) / n
                f["round-trips"] = (columns[name].kernel.store.conn.round_trips - trips0[name]) / n
                check(columns[name].kernel)
                columns[name].kernel.close()
            out[name] = f
        columns["raw"].conn.close()
    return out


# --- three writes, without the kernel ----------------------------------------------------------

MICRO_SETUP = [
    "CREATE TABLE a (k TEXT PRIMARY KEY, v TEXT, n BIGINT)",
    "CREATE TABLE b (k TEXT PRIMARY KEY, v TEXT, n BIGINT)",
    "CREATE TABLE d (k TEXT PRIMARY KEY, v TEXT, n BIGINT)",
    "CREATE SEQUENCE sq",
    "INSERT INTO b SELECT 'k' || g, 'x', 0 FROM generate_series(1, 100) g",
    """CREATE FUNCTION three(k TEXT, v TEXT, other TEXT, r TEXT) RETURNS BIGINT
       LANGUAGE plpgsql AS $$ DECLARE s BIGINT; BEGIN
       INSERT INTO a VALUES (k, v, nextval('sq')) RETURNING n INTO s;
       UPDATE b SET n = s WHERE b.k = other; INSERT INTO d VALUES (k, r, s); RETURN s; END $$""",
    """CREATE FUNCTION look(p TEXT) RETURNS TABLE (v TEXT) LANGUAGE plpgsql
       AS $$ BEGIN RETURN QUERY SELECT b.v FROM b WHERE b.k = p; END $$""",
    """CREATE FUNCTION look_set(p TEXT) RETURNS TABLE (v TEXT) LANGUAGE plpgsql
       SET plan_cache_mode = force_generic_plan SET enable_seqscan = off
       AS $$ BEGIN RETURN QUERY SELECT b.v FROM b WHERE b.k = p; END $$""",
]
#: each variant: its statements between BEGIN and COMMIT, each (name, text, values(key))
MICRO = {
    "three statements": [
        ("s0", "INSERT INTO a VALUES ($1, $2, nextval('sq'))", lambda k: [k, b"v" * 200]),
        ("s1", "UPDATE b SET n = currval('sq') WHERE k = $1", lambda k: [b"k5"]),
        ("s2", "INSERT INTO d VALUES ($1, $2, currval('sq'))", lambda k: [k, b"r"])],
    "one writable CTE": [
        ("cte", "WITH x AS (INSERT INTO a VALUES ($1, $2, nextval('sq')) RETURNING n), "
                "y AS (UPDATE b SET n = (SELECT n FROM x) WHERE k = $3), "
                "z AS (INSERT INTO d VALUES ($4, $5, (SELECT n FROM x))) SELECT n FROM x",
         lambda k: [k, b"v" * 200, b"k5", k, b"r"])],
    "one function": [
        ("fn", "SELECT three($1, $2, $3, $4)", lambda k: [k, b"v" * 200, b"k5", b"r"])],
    "a function call": [("look", "SELECT v FROM look($1)", lambda k: [b"k5"])],
    "the same with SET clauses": [("look_set", "SELECT v FROM look_set($1)", lambda k: [b"k5"])],
}


def micro(dsn: str, count: int, rounds: int = 6) -> dict:
    """Server CPU per transaction (BEGIN, the variant, COMMIT in one pipeline, commits not
    waiting for the disk: the statements' own cost) in alternating rounds."""
    with Schema(dsn) as schema:
        c = pg.driver().connect(schema, autocommit=True)
        c.execute("SET synchronous_commit = off")
        for s in MICRO_SETUP:
            c.execute(s)
        pq = c.pgconn
        pq.prepare(b"bg", b"BEGIN")
        pq.prepare(b"cm", b"COMMIT")
        for variant in MICRO.values():
            for name, text, _ in variant:
                pq.prepare(name.encode(), text.encode())
        names, spent, done = list(MICRO), dict.fromkeys(MICRO, 0.0), [0]

        def run(variant: list) -> None:
            for _ in range(count):
                done[0] += 1
                key = b"k-%d" % done[0]
                pq.enter_pipeline_mode()
                pq.send_query_prepared(b"bg", [])
                for name, _, values in variant:
                    pq.send_query_prepared(name.encode(), values(key))
                pq.send_query_prepared(b"cm", [])
                pq.pipeline_sync()
                while (r := pq.get_result()) is None or r.status != 10:     # PIPELINE_SYNC
                    assert r is None or r.status in (1, 2), r.error_message
                pq.exit_pipeline_mode()
        for i in range(rounds):
            for name in names[i % len(names):] + names[:i % len(names)]:
                before = backend_cpu(c)
                run(MICRO[name])
                spent[name] += backend_cpu(c) - before
        c.close()
    return {name: spent[name] / (rounds * count) * 1e6 for name in names}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--batch", type=int, default=13)
    ap.add_argument("--micro", type=int, default=1000, help="transactions per micro round")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    dsn = server()
    if dsn is None:
        print("peer-unavailable: no PostgreSQL (set WGK_BENCH_POSTGRES or WGK_TEST_POSTGRES)")
        return 0
    load0 = os.getloadavg()[0]
    kernel = kernel_rounds(dsn, args.rounds, args.batch)
    load1 = os.getloadavg()[0]
    small = micro(dsn, args.micro)
    load2 = os.getloadavg()[0]
    result = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "load": [round(x, 2) for x in (load0, load1, load2)], "rounds": args.rounds,
              "batch": args.batch, "kernel": kernel, "micro-count": args.micro,
              "micro-server-us": small}
    out = BENCH / "results" / f"pg-fold-{result['date'][:10]}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"on PostgreSQL, load {load0:.2f} -> {load1:.2f}, {args.rounds} rounds of "
          f"{args.batch} per column")
    for name, f in kernel.items():
        line = (f"  {name:<20} {f['per-second']:7.1f} /s   ratio to raw {f['ratio-to-raw']:.2f}"
                f"   client CPU {f['client-cpu-ms']:.2f} ms")
        if "server-cpu-ms" in f:
            line += f"   server CPU {f['server-cpu-ms']:.2f} ms"
        if "statements" in f:
            line += f"   statements {f['statements']:.2f}   round trips {f['round-trips']:.2f}"
        print(line)
    print(f"server CPU per transaction (BEGIN, the writes, COMMIT without waiting for the "
          f"disk), {args.micro} x 6 each, load {load1:.2f} -> {load2:.2f}")
    for name, us in small.items():
        print(f"  {name:<28} {us:7.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
