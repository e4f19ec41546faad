import random

random.seed(12345)
print(random.random(), random.randint(1, 100), random.choice("abcdef"))
print(random.sample(range(100), 5), random.uniform(1, 2), random.gauss(0, 1))
items = list(range(10))
random.shuffle(items)
print(items)
rng = random.Random("a string seed")
print(rng.randrange(0, 1000, 7), rng.choices("xyz", weights=[1, 2, 3], k=6), rng.getrandbits(64))
print(random.Random(0).random() == random.Random(0).random())
