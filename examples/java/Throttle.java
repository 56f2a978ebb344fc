// celld from Java with Jedis (redis.clients:jedis 4.x or 5.x): CL.THROTTLE
// through sendCommand, and its reply turned into HTTP rate-limit headers.
// Not compiled by celld's CI (no JDK there); docs/clients.md says so.
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.util.SafeEncoder;

public final class Throttle {
  private static final ProtocolCommand CL_THROTTLE = () -> SafeEncoder.encode("CL.THROTTLE");

  /** CL.THROTTLE's reply: limited, limit, remaining, retry_after, reset_after. */
  public record Decision(boolean limited, long limit, long remaining, long retryAfter, long resetAfter) {}

  public static Decision throttle(JedisPooled jedis, String key, long maxBurst, long count, long period, long quantity) {
    @SuppressWarnings("unchecked")
    List<Long> r = (List<Long>) jedis.sendCommand(CL_THROTTLE, key,
        Long.toString(maxBurst), Long.toString(count), Long.toString(period), Long.toString(quantity));
    return new Decision(r.get(0) == 1, r.get(1), r.get(2), r.get(3), r.get(4));
  }

  public static Map<String, String> headers(Decision d, long count, long period) {
    Map<String, String> h = new TreeMap<>();
    h.put("RateLimit-Limit", Long.toString(d.limit()));
    h.put("RateLimit-Remaining", Long.toString(d.remaining()));
    h.put("RateLimit-Reset", Long.toString(d.resetAfter()));
    h.put("RateLimit-Policy", d.limit() + ";w=" + ((d.limit() * period + count - 1) / count));
    if (d.limited() && d.retryAfter() >= 0) {
      h.put("Retry-After", Long.toString(Math.max(d.retryAfter(), 1))); // 0 means "under 1 ms"
    }
    return h;
  }

  public static void main(String[] args) {
    try (JedisPooled jedis = new JedisPooled("127.0.0.1", 6379)) {
      Decision d = throttle(jedis, "user123", 15, 30, 60, 1);
      System.out.println(d + " " + headers(d, 30, 60));
    }
  }
}
