import threading

started = threading.Event()


def forever():
    started.set()
    threading.Event().wait()  # blocks until the interpreter exits


t = threading.Thread(target=forever, daemon=True)
t.start()
started.wait()
print("daemon alive:", t.is_alive(), "daemon:", t.daemon)
print("main ends without waiting")
