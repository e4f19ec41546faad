# -*- coding: latin-1 -*-
WORD = "café"
