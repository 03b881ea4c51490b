"""What every client script shares: named steps, checks that say what failed, expected errors."""

import uuid


def check(cond, *what):
    if not cond:
        raise AssertionError(" ".join(str(w) for w in what))


def raises(exc, fn, *args, **kw):
    """Call fn, which must raise exc; returns the exception."""
    try:
        fn(*args, **kw)
    except exc as e:
        return e
    raise AssertionError(f"{getattr(fn, '__name__', fn)}{args} did not raise {exc.__name__}")


def step(name):
    print(f"- {name}", flush=True)


def uniq(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"
