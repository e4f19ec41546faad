# -*- coding: latin-1 -*-
"""A source file in Latin-1."""
text = "café crème brûlée £"
print(text, len(text), text.encode("utf-8"))
print(repr("à"), ord("ÿ"))
