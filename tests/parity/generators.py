import asyncio


def countdown(n):
    while n > 0:
        received = yield n
        if received:
            n = received
        n -= 1
    return "liftoff"


def delegate():
    result = yield from countdown(3)
    yield result


gen = countdown(5)
print(next(gen), gen.send(3), list(gen))
print(list(delegate()))
squares = (x * x for x in range(6) if x % 2)
print(list(squares), list(squares))


def closing():
    try:
        yield 1
        yield 2
    finally:
        print("generator closed")


g = closing()
print(next(g))
g.close()
try:
    countdown(0).__next__()
except StopIteration as exc:
    print("StopIteration value:", exc.value)


async def ticker(n):
    for i in range(n):
        await asyncio.sleep(0)
        yield i


async def main():
    print([i async for i in ticker(4)])
    agen = ticker(10)
    print(await agen.__anext__(), await anext(agen))
    await agen.aclose()
    return [x async for x in ticker(3) if x]


print(asyncio.run(main()))
