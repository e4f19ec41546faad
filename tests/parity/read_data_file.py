import csv
import os
from pathlib import Path

here = Path(__file__).parent
text = (here / "data.txt").read_text(encoding="utf-8")
print(text.splitlines())
with open(os.path.join(os.path.dirname(__file__), "data.csv"), newline="") as f:
    rows = list(csv.DictReader(f))
print(rows)
print(sum(int(r["qty"]) * float(r["price"]) for r in rows))
print(open("data.txt", "rb").read()[:10])  # relative to the working directory
print(sorted(p.name for p in here.glob("data.*")))
print((here / "data.txt").stat().st_size, os.path.isfile("data.csv"), os.path.exists("no-such"))
