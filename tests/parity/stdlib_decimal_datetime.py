import datetime as dt
from decimal import ROUND_HALF_UP, Decimal, getcontext
from fractions import Fraction

getcontext().prec = 30
print(Decimal(1) / Decimal(7))
print(Decimal("0.1") + Decimal("0.2"), 0.1 + 0.2)
print(Decimal("2.675").quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))
print(Fraction(3, 4) + Fraction(1, 6), Fraction("0.125"))

d = dt.date(2024, 2, 28)
print(d + dt.timedelta(days=1), d + dt.timedelta(days=2), d.isoformat(), d.strftime("%A %d %B %Y"))
t = dt.datetime(2021, 12, 31, 23, 59, 30, 123456, tzinfo=dt.timezone.utc)
print(t.isoformat(), (t + dt.timedelta(seconds=45)).isoformat())
print(t.astimezone(dt.timezone(dt.timedelta(hours=5, minutes=30))).isoformat())
print(dt.datetime.fromisoformat("2020-05-17T10:20:30+02:00").utcoffset())
print(dt.datetime(2000, 1, 1).timestamp() - dt.datetime(1999, 12, 31).timestamp())
print(dt.datetime.strptime("03/07/2022 14:05", "%d/%m/%Y %H:%M"), dt.date(2024, 3, 1).isocalendar())
print(repr(dt.timedelta(days=1, hours=-30, microseconds=7)))
