def ratio(a, b):
    return a / b


print("before")
print(ratio(1, 0))
print("never")
