// celld from Node.js with ioredis: CL.THROTTLE, and its reply turned into
// HTTP rate-limit headers.
//
//   npm install ioredis
//   CELLD_ADDR=127.0.0.1:6379 node throttle.js
//
// celld's CI checks this file's syntax with `node --check` (ioredis is not
// packaged by Debian, and CI does not reach npm); docs/clients.md says so.
'use strict';
const Redis = require('ioredis');

// CL.THROTTLE key maxBurst count period quantity, as an object.
async function throttle(redis, key, maxBurst, count, period, quantity = 1) {
  const [limited, limit, remaining, retryAfter, resetAfter] =
    await redis.call('CL.THROTTLE', key, maxBurst, count, period, quantity);
  return { limited: limited === 1, limit, remaining, retryAfter, resetAfter };
}

// The RateLimit-* headers (and Retry-After when denied) for decision d.
function headers(d, count, period) {
  const h = {
    'RateLimit-Limit': String(d.limit),
    'RateLimit-Remaining': String(d.remaining),
    'RateLimit-Reset': String(d.resetAfter),
    // seconds a full bucket takes to refill: ceil(limit * period / count)
    'RateLimit-Policy': `${d.limit};w=${Math.ceil((d.limit * period) / count)}`,
  };
  if (d.limited && d.retryAfter >= 0) {
    h['Retry-After'] = String(Math.max(d.retryAfter, 1)); // 0 means "under 1 ms"
  }
  return h;
}

// An Express-style middleware: 429 with headers when limited; when celld
// cannot answer, fail open (let the request through) or closed (503).
function rateLimit(redis, { maxBurst, count, period, key, failOpen }) {
  return async (req, res, next) => {
    let d;
    try {
      d = await throttle(redis, key(req), maxBurst, count, period);
    } catch (err) {
      if (failOpen) return next();
      res.set('Retry-After', '1');
      return res.status(503).send('rate limiter unavailable');
    }
    res.set(headers(d, count, period));
    if (d.limited) return res.status(d.retryAfter < 0 ? 413 : 429).send('rate limited');
    return next();
  };
}

async function main() {
  const [host, port] = (process.env.CELLD_ADDR || '127.0.0.1:6379').split(':');
  const redis = new Redis({ host, port: Number(port) });
  const d = await throttle(redis, 'example:node:user123', 15, 30, 60);
  console.log(d, headers(d, 30, 60));
  redis.disconnect();
}

module.exports = { throttle, headers, rateLimit };
if (require.main === module) main();
