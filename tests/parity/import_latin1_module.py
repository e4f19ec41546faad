# A module of the program with a coding declaration: decoded as python decodes it,
# whether its bytecode is there (python wrote it) or not (the -B invocation).
import _latin1_module

print(_latin1_module.WORD, len(_latin1_module.WORD))
