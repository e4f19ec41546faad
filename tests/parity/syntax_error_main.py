print("this never runs")


def broken(:
    pass
