with open("/etc/hostname") as hostname:
    print(hostname.read())
