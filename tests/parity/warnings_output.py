import warnings


def old_api():
    warnings.warn("old_api is deprecated", DeprecationWarning, stacklevel=2)


warnings.warn("a plain user warning")
old_api()
warnings.warn("shown once", RuntimeWarning)
for _ in range(3):
    warnings.warn("in a loop")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    warnings.warn("recorded", FutureWarning)
print([(w.category.__name__, str(w.message)) for w in caught])
warnings.filterwarnings("error", category=ResourceWarning)
try:
    warnings.warn("now an error", ResourceWarning)
except ResourceWarning as exc:
    print("raised:", exc)
print("done")
