"""Non-ASCII output on stdout and stderr under a UTF-8 locale."""
import sys
import unicodedata

print("Grüße aus Köln — «ça va?»")
print("日本語のテキスト, 中文, 한국어")
print("emoji: \N{SNAKE} \N{ROCKET} \U0001F600")
print("combining: e\u0301 vs \u00e9:", unicodedata.normalize("NFC", "e\u0301") == "\u00e9")
print("rtl: שלום עולם مرحبا")
print(sys.stdout.encoding, sys.stdout.errors, sys.stderr.encoding, sys.stderr.errors)
print("stderr: Ωμέγα ✓", file=sys.stderr)
print(len("\U0001F600".encode()), "\u2603".upper(), "ß".upper(), "İ".lower())
sys.stdout.buffer.write("raw bytes: ½\n".encode())
