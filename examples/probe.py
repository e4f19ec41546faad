print(open("/etc/hostname").read())
