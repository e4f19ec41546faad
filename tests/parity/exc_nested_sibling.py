import _helper


def run():
    return _helper.outer("missing")


print("calling the helper")
run()
