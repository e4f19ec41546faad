import concurrent.futures
import queue
import threading

lock = threading.Lock()
total = 0


def add(n):
    global total
    for _ in range(1000):
        with lock:
            total += n


threads = [threading.Thread(target=add, args=(i,)) for i in range(1, 5)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("total", total)

with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
    print(list(pool.map(lambda x: x * x, range(10))))
    futures = {pool.submit(pow, 2, n): n for n in range(5)}
    print(sorted(f.result() for f in concurrent.futures.as_completed(futures)))
    bad = pool.submit(int, "x")
    print("exception:", repr(bad.exception()))

q = queue.Queue()
barrier = threading.Barrier(3)


def producer(i):
    barrier.wait()
    q.put(i)


ts = [threading.Thread(target=producer, args=(i,)) for i in range(3)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(sorted(q.get() for _ in range(3)), threading.active_count())
local = threading.local()
local.x = "main"
print(local.x, threading.current_thread() is threading.main_thread())
