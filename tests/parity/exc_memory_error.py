def allocate():
    raise MemoryError("the program's own")


print("before")
allocate()
