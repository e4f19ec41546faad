print(str(exit), repr(quit), type(exit).__name__)
try:
    exit(7)
finally:
    print("finally runs before exit")
