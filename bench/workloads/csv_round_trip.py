"""CSV round trip: write 120,000 rows with csv.writer, read them back with csv.reader.

Usage: python csv_round_trip.py OUTPUT.csv
The file's directory must be writable and readable. Prints one line: the rows read and
the sum of one column, so every runner's output can be compared.
"""

import csv
import sys

ROWS = 120_000


def main() -> None:
    path = sys.argv[1]
    with open(path, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["id", "name", "price", "city"])
        for i in range(ROWS):
            writer.writerow([i, f"item-{i:06d}", f"{i * 0.37 % 1000:.2f}", f"city-{i % 97}"])
    total = 0.0
    count = 0
    with open(path, newline="", encoding="utf-8") as file:
        for row in csv.DictReader(file):
            total += float(row["price"])
            count += 1
    print(f"{count} rows, price total {total:.2f}")


if __name__ == "__main__":
    main()
