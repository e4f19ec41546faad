import os
import signal
import time

received = []
signal.signal(signal.SIGUSR1, lambda signum, frame: received.append(signal.Signals(signum).name))
os.kill(os.getpid(), signal.SIGUSR1)
signal.raise_signal(signal.SIGUSR1)
print(received)
print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)
print(signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGPIPE))
signal.signal(signal.SIGALRM, lambda *a: received.append("alarm"))
signal.setitimer(signal.ITIMER_REAL, 0.02)
time.sleep(0.5)
print(received)
try:
    signal.signal(signal.SIGINT, lambda *a: None)
    os.kill(os.getpid(), signal.SIGINT)
    print("SIGINT caught by the handler")
finally:
    signal.signal(signal.SIGINT, signal.default_int_handler)
