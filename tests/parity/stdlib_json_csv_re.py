import csv
import io
import json
import re

doc = {"name": "pynox", "tags": ["a", "b"], "nested": {"n": 1.5, "ok": True, "none": None}}
text = json.dumps(doc, indent=2, sort_keys=True)
print(text)
print(json.loads(text) == doc, json.dumps("ünï"), json.dumps("ünï", ensure_ascii=False))
try:
    json.loads("{bad json}")
except json.JSONDecodeError as exc:
    print("JSONDecodeError:", exc)

out = io.StringIO()
writer = csv.writer(out)
writer.writerows([["a", "b,c", 'd"e'], [1, 2.5, None]])
print(repr(out.getvalue()))
print(list(csv.reader(io.StringIO(out.getvalue()))))

pattern = re.compile(r"(?P<key>\w+)=(?P<value>[^;]*)")
print([m.groupdict() for m in pattern.finditer("a=1;bb=two;c=")])
print(re.sub(r"(\d+)", lambda m: str(int(m.group(1)) * 2), "1 22 333"))
print(re.split(r"\s*[,;]\s*", "a , b;c ;d"), re.fullmatch(r"[a-z]+", "abc") is not None)
print(re.findall(r"\b\w", "the quick brown fox", flags=re.I))
