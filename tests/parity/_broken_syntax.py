VALUE = 1
def f(x):
    return x +* 2
