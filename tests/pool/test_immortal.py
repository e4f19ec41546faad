"""The pool server's objects are immortal in its children from Python 3.12 on
(runtime/immortal.c): a child that uses them writes nothing to their pages, so it copies
fewer of them. Before 3.12 there is no such thing, and nothing changes. Nor do children
inherit the server's threading, whose after-fork hook copies pages too."""

from __future__ import annotations

import subprocess
import sys

from support.pool_client import PoolClient
from support.pool_requests import assert_ok, code, new_id

IMMORTAL = sys.version_info >= (3, 12)
IMMORTAL_COUNT = 2**31  # sys.getrefcount of an immortal object is at least this


def test_immortalize_marks_every_object_the_roots_reach() -> None:
    """Run apart: the objects of the process that calls it stay immortal."""
    program = code(f"""
        import gc, sys
        from pynox._native import immortalize

        class Holder:
            pass

        holder = Holder()
        holder.text = "".join(["re", "ached"])  # a str: untracked, reached through a dict
        holder.pair = (float(len(sys.argv)) + 0.5, "x" * 3)  # an untracked tuple's items

        def function():
            return "a constant of a code object"

        marked = immortalize(gc.get_objects())
        reached = [holder, holder.text, holder.pair, holder.pair[0], Holder, function,
                   function.__code__, function.__code__.co_consts[-1]]
        counts = [sys.getrefcount(item) for item in reached]
        print(marked, all(count >= {IMMORTAL_COUNT} for count in counts),
              all(count < 100 for count in counts))
        made_after = object()
        print(sys.getrefcount(made_after) < 100)
        gc.collect()  # the collector still runs over them
        try:
            immortalize(holder)
        except TypeError as exc:
            print(exc)
    """)
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, cwd="/"
    )
    assert done.returncode == 0, done.stderr
    marked, all_immortal, all_mortal = done.stdout.splitlines()[0].split()
    if IMMORTAL:
        assert int(marked) > 1000
        assert (all_immortal, all_mortal) == ("True", "False")
    else:
        assert (marked, all_immortal, all_mortal) == ("0", "False", "True")
    assert done.stdout.splitlines()[1:] == [
        "True",
        "immortalize() takes a list, like gc.get_objects()",
    ]


def test_a_child_finds_what_the_pool_preloaded_immortal_and_its_own_objects_not() -> None:
    program = code(f"""
        import fractions, sys
        print(sys.getrefcount(fractions.Fraction.limit_denominator) >= {IMMORTAL_COUNT})
        print(sys.getrefcount(fractions.Fraction(1, 3)) >= {IMMORTAL_COUNT})
    """)
    with PoolClient(workers=1, preload=["fractions"]) as client:
        assert_ok(client.run({"id": new_id(), "code": program}), f"{IMMORTAL}\nFalse\n")
        assert client.close() == 0


def test_a_child_may_unfreeze_collect_and_replace_what_the_pool_holds() -> None:
    """Immortal objects are still the program's to change: it may rebind a preloaded
    module's names, run the collector over everything, and drop what it replaced."""
    program = code("""
        import fractions, gc, weakref
        half = fractions.Fraction(2, 4)
        fractions.Fraction = None
        gc.unfreeze()
        found = gc.collect()
        class Mine:
            pass
        mine = Mine()
        gone = []
        weakref.finalize(mine, gone.append, "collected")
        del mine
        gc.collect()
        print(half, fractions.Fraction, gone)
    """)
    with PoolClient(workers=1, preload=["fractions"]) as client:
        for _ in range(2):  # the next child starts from the pool's objects, unchanged
            assert_ok(client.run({"id": new_id(), "code": program}), "1/2 None ['collected']\n")
        assert client.close() == 0


def test_children_fork_without_the_pool_servers_threading(pool: PoolClient) -> None:
    """threading registers a hook that runs in every forked child and copies pages of its
    own; the pool server imports it only after the zygote's fork, so a program that does
    not use threads never pays for it, and one that does imports it as python would."""
    program = code("""
        import sys
        print("threading" in sys.modules)
        import threading
        worker = threading.Thread(target=print, args=("a thread ran",))
        worker.start()
        worker.join()
    """)
    assert_ok(pool.run({"id": new_id(), "code": program}), "False\na thread ran\n")
