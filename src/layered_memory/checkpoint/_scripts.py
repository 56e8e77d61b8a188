"""The Lua scripts that keep the Redis side of the cache consistent (one round trip each).

Redis holds, per thread, a *version token* and (with a signing key) the serialized latest tuple
of each namespace; a global *epoch* token covers what cannot be tied to one thread. A cached
tuple is served only while ``epoch|version`` is exactly what it was when the tuple was read from
the wrapped saver. Three rules make that safe:

- Every token is ``<run_id>:<hex>`` (the ``run_id`` of the Redis server that made it); a
  token of another shape or made by another server run is never trusted (it is replaced): a
  Redis restarted from an older snapshot, or a replica promoted while lagging, brings back
  old tokens under a new ``run_id``, so everything misses.
- A writer marks the thread *pending* (with a lease) and drops its token before writing to the
  wrapped saver, and drops it again (clearing the mark) after; the next read makes a fresh
  random token, which no worker holds a snapshot under. While a mark is pending nothing
  is served or filled for that thread, so a write whose second step never reached Redis leaves
  the thread uncached until the lease runs out, never stale.
- A fill is a compare-and-set on the token read *before* the wrapped saver was read.

Scripts read the server's ``run_id`` with ``INFO server`` (about 15 µs) so no client-side state
can be out of date. Keys of the wrong type (planted, or left by another program) are deleted.
"""

from __future__ import annotations

__all__ = ["BEGIN_WRITE", "END_WRITE", "FILL", "READ", "REPAIR"]

_PRELUDE = """
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local function ensure_type(key, kind)
  local found = redis.call('TYPE', key)['ok']
  if found ~= 'none' and found ~= kind then redis.call('DEL', key) end
end
local function current(token)
  -- The whole token, not its start: bytes planted after a valid run_id are never served.
  return token and string.match(token, '^' .. run .. ':%x+$') ~= nil
end
local function pending(key)
  ensure_type(key, 'zset')
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  return redis.call('ZCARD', key) > 0
end
ensure_type(KEYS[1], 'string')
ensure_type(KEYS[2], 'hash')
"""

# KEYS: epoch, thread hash, thread pending zset, global pending zset.
# ARGV: fresh epoch suffix, fresh version suffix, ttl ms, payload field ('' = none),
#       the version the caller already holds ('' = none).
# Returns {} while a write is pending, else {version} or {version, payload}.
READ = (
    _PRELUDE
    + """
if pending(KEYS[3]) or pending(KEYS[4]) then return {} end
local epoch = redis.call('GET', KEYS[1])
if not current(epoch) then
  epoch = run .. ':' .. ARGV[1]
  redis.call('SET', KEYS[1], epoch, 'PX', ARGV[3])
end
local version = redis.call('HGET', KEYS[2], 'v')
if not current(version) then
  version = run .. ':' .. ARGV[2]
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[2], 'v', version)
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
local full = epoch .. '|' .. version
if ARGV[4] ~= '' and ARGV[5] ~= full then
  local payload = redis.call('HGET', KEYS[2], ARGV[4])
  if payload and string.sub(payload, 1, #full + 1) == full .. '\\n' then
    return {full, payload}
  end
end
return {full}
"""
)

# KEYS: as READ. ARGV: the version read before the wrapped saver was, payload field, payload,
# ttl ms. Returns 1 when stored, 0 when the thread changed meanwhile.
FILL = (
    _PRELUDE
    + """
if pending(KEYS[3]) or pending(KEYS[4]) then return 0 end
local epoch = redis.call('GET', KEYS[1])
local version = redis.call('HGET', KEYS[2], 'v')
if not (current(epoch) and current(version)) then return 0 end
if epoch .. '|' .. version ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return 1
"""
)

# Dropping a token is enough to change it: the next READ makes a fresh random one, which no
# worker holds a snapshot under. It also leaves nothing behind a deleted thread.
_DROP_TOKEN = """
if ARGV[3] == 'global' then
  redis.call('DEL', KEYS[1])
else
  redis.call('DEL', KEYS[2])
end
return 1
"""

# KEYS: as READ. ARGV: operation id, lease ms, 'thread' | 'global'.
BEGIN_WRITE = (
    _PRELUDE
    + """
local marks = KEYS[3]
if ARGV[3] == 'global' then marks = KEYS[4] end
ensure_type(marks, 'zset')
redis.call('ZADD', marks, now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', marks, ARGV[2])
"""
    + _DROP_TOKEN
)

END_WRITE = (
    _PRELUDE
    + """
local marks = KEYS[3]
if ARGV[3] == 'global' then marks = KEYS[4] end
ensure_type(marks, 'zset')
redis.call('ZREM', marks, ARGV[1])
"""
    + _DROP_TOKEN
)

# KEYS: epoch. After an outage whatever was cached before is stale: drop the epoch.
REPAIR = """
redis.call('DEL', KEYS[1])
return 1
"""
