name = "Pynox"
print(f"Hello from {name}!")
