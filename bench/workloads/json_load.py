"""JSON load: write about 4 MiB of JSON with json.dumps, then json.load it from the file.

Usage: python json_load.py OUTPUT.json
json.dumps already uses CPython's C encoder, so the write costs the same under every
runner; the part that differs, if anything, is reading the file back with json.load.
"""

import json
import sys

RECORDS = 25_000


def main() -> None:
    path = sys.argv[1]
    records = [
        {"id": i, "name": f"item-{i:06d}", "tags": ["a", "b", f"g{i % 17}"], "ok": i % 3 == 0}
        for i in range(RECORDS)
    ]
    with open(path, "w", encoding="utf-8") as file:
        file.write(json.dumps(records))
    with open(path, encoding="utf-8") as file:
        loaded = json.load(file)
    print(f"{len(loaded)} records loaded")


if __name__ == "__main__":
    main()
