import atexit
import threading

main_done = threading.Event()
atexit.register(print, "atexit runs after the worker was joined")


def worker():
    main_done.wait()
    for i in range(3):
        print("worker after main", i)


t = threading.Thread(target=worker, name="worker")
t.start()
print("main thread", threading.current_thread().name, "is ending; worker alive:", t.is_alive())
main_done.set()
