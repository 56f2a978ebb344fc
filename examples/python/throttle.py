"""celld from Python with redis-py: CL.THROTTLE, and its reply turned into
HTTP rate-limit headers. Run by celld's CI (examples/clients_test.go)
against a real celld at $CELLD_ADDR (host:port, default 127.0.0.1:6379).

    pip install redis   # or: apt-get install python3-redis
"""
import os

import redis


def throttle(r, key, max_burst, count, period, quantity=1):
    """CL.THROTTLE key max_burst count period quantity, as a dict."""
    limited, limit, remaining, retry_after, reset_after = r.execute_command(
        "CL.THROTTLE", key, max_burst, count, period, quantity)
    return {"limited": limited == 1, "limit": limit, "remaining": remaining,
            "retry_after": retry_after, "reset_after": reset_after}


def headers(d, count, period):
    """The RateLimit-* headers (and Retry-After when denied) for decision d."""
    h = {
        "RateLimit-Limit": str(d["limit"]),
        "RateLimit-Remaining": str(d["remaining"]),
        "RateLimit-Reset": str(d["reset_after"]),
        # seconds a full bucket takes to refill: ceil(limit * period / count)
        "RateLimit-Policy": "%d;w=%d" % (d["limit"], -(-d["limit"] * period // count)),
    }
    if d["limited"] and d["retry_after"] >= 0:
        # at least 1: 0 means "less than a millisecond", too soon for a client
        h["Retry-After"] = str(max(d["retry_after"], 1))
    return h


def main():
    host, _, port = os.environ.get("CELLD_ADDR", "127.0.0.1:6379").rpartition(":")
    r = redis.Redis(host=host, port=int(port))
    key = "example:python:user123"
    r.delete(key)

    # 30 requests per 60 s, bursts of up to 16.
    first = throttle(r, key, 15, 30, 60)
    assert first == {"limited": False, "limit": 16, "remaining": 15,
                     "retry_after": -1, "reset_after": 2}, first
    for _ in range(15):
        d = throttle(r, key, 15, 30, 60)
    assert d["remaining"] == 0 and not d["limited"], d
    denied = throttle(r, key, 15, 30, 60)
    assert denied["limited"] and denied["retry_after"] == 2, denied
    h = headers(denied, 30, 60)
    assert h["Retry-After"] == "2" and h["RateLimit-Limit"] == "16", h
    assert h["RateLimit-Policy"] == "16;w=32", h

    # Errors are redis.ResponseError with redis-cell's text.
    try:
        throttle(r, key, 15, 0, 60)
        raise AssertionError("a zero rate was accepted")
    except redis.ResponseError as e:
        assert str(e) == "Cell error: Store error: Zero rates are not supported", e
    print("python example: ok", h)


if __name__ == "__main__":
    main()
