"""Tests of the sandbox core through its cffi binding (pynox._core), one module per
kernel mechanism, as runtime/ has one C file per mechanism.

Every test of a mechanism forks a child that applies a policy with
pynox_sandbox_apply() and then tries something; the child sends a JSON report
back over a pipe and the parent asserts on it (support/sandboxed_child.py).
Attempts are chosen so that, where possible, the kernel would answer differently
without the layer under test (for example bpf() with an unknown command gives
EINVAL unfiltered and EPERM filtered), so each test can fail.
test_seccomp_rules.py reads the filter's rule table as data instead, installing
nothing (marked unit).
"""
