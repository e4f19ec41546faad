import atexit

atexit.register(print, "atexit after quit()")
print("calling quit()")
quit()
print("never")
