"""What a program that sizes itself to its share of the machine reads, as DuckDB does as
it connects: the control groups it is in (/proc/self/cgroup), then the CPU quota and the
memory limit of each, as cgroup v2 or v1 names them, from its own group up to the root.
"""
import os

LIMITS = {
    "": ["cpu.max", "memory.max"],
    "cpu": ["cpu.cfs_quota_us", "cpu.cfs_period_us"],
    "memory": ["memory.limit_in_bytes"],
}

with open("/proc/self/cgroup") as listing:
    lines = listing.read().splitlines()
print(len(lines) > 0)
for line in lines:
    _, controllers, group = line.split(":", 2)
    for controller in controllers.split(",") if controllers else [""]:
        mount = "/sys/fs/cgroup/" + controller if controller else "/sys/fs/cgroup"
        folder = group.rstrip("/")
        while True:
            for name in LIMITS.get(controller, []):
                path = f"{mount}{folder}/{name}"
                if os.path.exists(path):
                    with open(path) as limit:
                        print(path, limit.read().strip())
            if not folder:
                break
            folder = folder.rpartition("/")[0]
