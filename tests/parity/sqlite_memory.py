import sqlite3

con = sqlite3.connect(":memory:")
con.row_factory = sqlite3.Row
con.execute("create table t (id integer primary key, name text, score real)")
con.executemany("insert into t (name, score) values (?, ?)", [("ann", 9.5), ("bob", 7.25), ("cy", None)])
con.commit()
for row in con.execute("select * from t order by score desc nulls last"):
    print(dict(row))
print(con.execute("select count(*), avg(score), group_concat(name, '|') from t").fetchone()[:])
try:
    con.execute("insert into t (id, name) values (1, 'dup')")
except sqlite3.IntegrityError as exc:
    print("IntegrityError:", exc)
con.create_function("shout", 1, lambda s: s.upper() + "!")
print(con.execute("select shout(name) from t where id = 2").fetchone()[0])
print(sqlite3.complete_statement("select 1;"), type(sqlite3.sqlite_version).__name__)
con.close()
