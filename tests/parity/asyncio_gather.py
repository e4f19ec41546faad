import asyncio


async def job(name, delay, log):
    log.append(f"start {name}")
    await asyncio.sleep(delay)
    log.append(f"end {name}")
    return name.upper()


async def failing():
    await asyncio.sleep(0)
    raise ValueError("async failure")


async def main():
    log = []
    results = await asyncio.gather(job("a", 0.03, log), job("b", 0.01, log), job("c", 0, log))
    print(results)
    print(log)
    queue = asyncio.Queue()
    for i in range(3):
        queue.put_nowait(i)
    print([await queue.get() for _ in range(3)])
    outcome = await asyncio.gather(failing(), job("d", 0, []), return_exceptions=True)
    print([repr(x) for x in outcome])
    try:
        await asyncio.wait_for(asyncio.sleep(10), timeout=0.01)
    except asyncio.TimeoutError:
        print("timed out as expected")
    task = asyncio.create_task(asyncio.sleep(10))
    await asyncio.sleep(0)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        print("cancelled:", task.cancelled())
    return "done"


print(asyncio.run(main()))
