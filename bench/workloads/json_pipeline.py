"""JSON pipeline: build about 4 MiB of records, json.dump them to a file, load them back.

Usage: python json_pipeline.py OUTPUT.json
The output file's directory must be writable and readable (under pynox: --allow-write and
--allow-read). Prints one line: how many records and how many bytes went through the file.
"""

import json
import os
import sys

RECORDS = 25_000


def build_records(count: int) -> list[dict[str, object]]:
    return [
        {
            "id": i,
            "name": f"item-{i:06d}",
            "price": round(i * 0.37 % 1000, 2),
            "in_stock": i % 3 != 0,
            "tags": ["sale", "new", f"group-{i % 17}"],
            "dimensions": {"w": i % 50, "h": i % 70, "d": i % 90},
            "note": None if i % 5 else "fragile",
        }
        for i in range(count)
    ]


def main() -> None:
    path = sys.argv[1]
    records = build_records(RECORDS)
    with open(path, "w", encoding="utf-8") as file:
        json.dump(records, file)
    with open(path, encoding="utf-8") as file:
        loaded = json.load(file)
    if loaded != records:
        raise SystemExit("the records read back differ from the records written")
    size = os.path.getsize(path)
    print(f"{len(loaded)} records, {size} bytes")


if __name__ == "__main__":
    main()
