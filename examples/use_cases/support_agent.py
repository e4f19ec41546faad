"""A support agent calling your backend: the refund rule holds, the database stays shut.

The model's code reaches the shop only through two host functions, `get_order` and
`refund`. They run in this process, outside the sandbox, so they can open the SQLite
database, and `refund` enforces the shop's rule: an agent may refund at most 100.00 per
order; more needs a person. The model's own code cannot open the database file, so the
rule cannot be walked around.

    python examples/use_cases/support_agent.py

The database lives in a temporary directory that is removed at the end.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from transcript import show_call

import pynox

REFUND_LIMIT = 100.00

ORDERS = [
    (1042, "Ada", "desk lamp", 19.50),
    (1043, "Grace", "standing desk", 420.00),
]


class ShopBackend:
    """The application's side: the database, and the rules around changing it."""

    def __init__(self, database: Path) -> None:
        self.database = database
        with closing(self._connect()) as db, db:
            db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer, item, total)")
            db.execute("CREATE TABLE refunds (order_id INTEGER, amount, reason)")
            db.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", ORDERS)

    def _connect(self) -> sqlite3.Connection:
        # One connection per call: host functions may be called from another thread.
        return sqlite3.connect(self.database)

    def get_order(self, order_id: int) -> dict[str, Any]:
        """Look up an order: customer, item, total, and how much was refunded already."""
        with closing(self._connect()) as db:
            row = db.execute(
                "SELECT customer, item, total FROM orders WHERE id = ?", (order_id,)
            ).fetchone()
            if row is None:
                raise LookupError(f"there is no order {order_id}")
            (refunded,) = db.execute(
                "SELECT COALESCE(SUM(amount), 0) FROM refunds WHERE order_id = ?", (order_id,)
            ).fetchone()
        customer, item, total = row
        return {
            "id": order_id,
            "customer": customer,
            "item": item,
            "total": total,
            "refunded": refunded,
        }

    def refund(self, order_id: int, amount: float, reason: str) -> str:
        """Refund part or all of an order; at most 100.00 per order without a person."""
        order = self.get_order(order_id)
        if amount <= 0:
            raise ValueError("the amount must be positive")
        if order["refunded"] + amount > order["total"]:
            raise ValueError(f"order {order_id} totals {order['total']:.2f}; that is too much")
        if order["refunded"] + amount > REFUND_LIMIT:
            raise PermissionError(
                f"refunds above {REFUND_LIMIT:.2f} per order need a person's approval; "
                "tell the customer a colleague will follow up"
            )
        with closing(self._connect()) as db, db:
            db.execute("INSERT INTO refunds VALUES (?, ?, ?)", (order_id, amount, reason))
        return f"refunded {amount:.2f} on order {order_id}"

    def refunds(self) -> list[tuple[int, float, str]]:
        with closing(self._connect()) as db:
            return db.execute("SELECT order_id, amount, reason FROM refunds").fetchall()


def model_calls(database: Path) -> list[tuple[str, str]]:
    """What a model handling two refund requests might send, in order."""
    return [
        (
            "refund Ada's broken lamp",
            """\
from pynox_host import get_order, refund
order = get_order(1042)
print(order)
print(refund(1042, order["total"], "arrived broken"))
""",
        ),
        (
            "refund Grace's standing desk",
            """\
from pynox_host import get_order, refund
order = get_order(1043)
print(order)
print(refund(1043, order["total"], "changed her mind"))
""",
        ),
        (
            "write the refund into the shop's database directly",
            f"""\
import sqlite3
db = sqlite3.connect({str(database)!r})
db.execute("INSERT INTO refunds VALUES (1043, 420.0, 'changed her mind')")
db.commit()
print("refund recorded")
""",
        ),
    ]


@contextmanager
def support_desk() -> Iterator[tuple[ShopBackend, Callable[[str], str]]]:
    """The shop's backend in a temporary directory, and the agent's tool over it."""
    with tempfile.TemporaryDirectory(prefix="pynox-shop-") as tmp:
        backend = ShopBackend(Path(tmp) / "shop.db")
        functions = {"get_order": backend.get_order, "refund": backend.refund}
        with pynox.Pool() as pool:
            yield backend, pool.tool(functions=functions, timeout="10s")


def main() -> None:
    with support_desk() as (backend, run_python):
        for intent, code in model_calls(backend.database):
            show_call(intent, run_python(code), code)
        refunds = backend.refunds()
    print("refunds in the database:", refunds)
    over_limit = [row for row in refunds if row[1] > REFUND_LIMIT]
    print(
        f"denied: refunds over {REFUND_LIMIT:.2f}:",
        "one went THROUGH" if over_limit else "none went through, by the rule or the database",
    )
    print(
        "done:  ",
        ", ".join(f"{amount:.2f} refunded on order {order}" for order, amount, _ in refunds),
    )


if __name__ == "__main__":
    main()
