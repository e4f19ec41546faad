# A module of the program that holds a null byte: python's error, of python's type (a
# ValueError before 3.11, a SyntaxError since), whoever compiles the module.
try:
    import _null_byte_module  # noqa: F401
except (SyntaxError, ValueError) as error:
    print(type(error).__name__, error)
