from . import consts


def double(x):
    return x * consts.FACTOR
