import functools
import heapq
import itertools
import operator
from collections import ChainMap, Counter, OrderedDict, defaultdict, deque, namedtuple

c = Counter("mississippi")
print(c.most_common(3), sorted(c.elements())[:5])
d = defaultdict(list)
for k, v in [("a", 1), ("b", 2), ("a", 3)]:
    d[k].append(v)
print(dict(d))
q = deque(range(5), maxlen=4)
q.rotate(1)
q.appendleft(-1)
print(q)
Point = namedtuple("Point", "x y")
p = Point(1, y=2)
print(p, p._asdict(), p._replace(x=9))
od = OrderedDict.fromkeys("abc")
od.move_to_end("a")
print(list(od), ChainMap({"a": 1}, {"a": 2, "b": 3})["b"])
print(list(itertools.permutations("abc", 2))[:4], list(itertools.combinations(range(4), 3)))
print(list(itertools.accumulate([1, 2, 3, 4], operator.mul)), list(itertools.chain.from_iterable(["ab", "cd"])))
print([(k, len(list(g))) for k, g in itertools.groupby("aaabccdd")])
print(list(itertools.islice(itertools.count(10, 5), 4)), list(itertools.zip_longest("ab", "xyz", fillvalue="-")))
print(list(itertools.pairwise(range(4))) if hasattr(itertools, "pairwise") else None)
print(functools.reduce(operator.add, range(10)), heapq.nsmallest(3, [5, 1, 4, 2, 3]))


@functools.lru_cache(maxsize=None)
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


print(fib(80), fib.cache_info())
