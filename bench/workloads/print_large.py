"""Large output: print 200,000 lines, as a chatty program or a big report does.

Under the pool the output is captured (and cut at the request's max_output); the command
runs write to the benchmark's null device.
"""

for i in range(200_000):
    print(i, "a line of a long report")
