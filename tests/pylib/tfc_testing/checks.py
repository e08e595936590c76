"""Checks that print one line each, "PASS: label" or "FAIL: label", and
count them (the runtime's and the Python package's tests). Standard library
only."""


class Checks:
    def __init__(self):
        self.passed = self.failed = 0

    def expect(self, label, ok):
        print(("PASS: " if ok else "FAIL: ") + label)
        self.failed += not ok
        self.passed += bool(ok)
        return ok

    def refused(self, label, fn, error, ok, unrefused=None):
        """fn() must raise `error` e with ok(e) true; the line is "label: e",
        or `unrefused` (default: label), failed, when fn() returned."""
        try:
            fn()
        except error as e:
            return self.expect("%s: %s" % (label, e), ok(e))
        return self.expect(unrefused or label, False)
