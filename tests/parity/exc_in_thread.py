import threading


def crash():
    raise RuntimeError("raised in a thread")


t = threading.Thread(target=crash, name="crasher")
t.start()
t.join()
print("main continues after the thread's exception")
