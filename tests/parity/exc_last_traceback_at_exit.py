import atexit
import sys
import traceback


@atexit.register
def report_again():
    # An error reporter's (or pdb.pm()'s) look at the error the program ended with.
    print("again:", file=sys.stderr)
    traceback.print_tb(sys.last_traceback)
    print(sys.last_value.__traceback__ is sys.last_traceback, sys.last_type.__name__)


def load(name):
    return {}[name]


load("settings")
