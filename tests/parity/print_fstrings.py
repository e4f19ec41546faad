"""Printing: sep/end, f-strings with format specs, conversions and the = specifier."""
import math

name = "Pynox"
value = 1234.56789
items = [1, 2, 3]
print("hello", "world", sep=", ", end="!\n")
print(f"{name!r} {name:>10}|{name:<10}|{name:^10}|")
print(f"{value:.2f} {value:,.1f} {value:e} {value:015.3f} {255:#x} {255:08b} {0.25:.0%}")
print(f"{items=} {len(items) * 2 = }")
print(f"{math.pi:{'.'}{4}}")
print(f"{'nested {braces}'!s:*^30}")
print("%-6s|%5.1f%%" % ("x", 42.0), "%(k)s" % {"k": "mapped"})
print("{0} {1:>4} {key}".format("a", "b", key="c"))
print(repr("quote's \"both\""), ascii("naïve"))
print(*range(5))
print()
print(1, 2, sep="")
print("no newline", end="")
print(" then newline")
print(True, None, 3 + 4j, b"bytes", bytearray(b"ba"), 10**30, -0.0, float("inf"))
