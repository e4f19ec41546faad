def cleanup():
    raise RuntimeError("cleanup failed too")


try:
    [][3]
except IndexError:
    cleanup()
