"""The Lua scripts that keep the Redis side of the cache consistent (one round trip each).

Redis holds, per thread, a *version token* and (with a signing key) the serialized latest tuple
of each namespace; a global *epoch* token covers what cannot be tied to one thread. A cached
tuple is served only while ``epoch|version`` is exactly what it was when the tuple was read from
the wrapped saver. Three rules make that safe:

- Every token is ``<replid>:<hex>``, made under the server's replication id (``master_replid``
  of ``INFO replication``); a token of another shape or another replication id is never
  trusted (it is replaced). Redis gives a server a new replication id whenever its data may
  have lost writes it acknowledged: at every start (a restart from an older RDB; Redis 7 keeps
  the old id only as ``master_replid2``), at every promotion of a replica (``REPLICAOF NO
  ONE``, a Sentinel or cluster failover), and when a replica resyncs it takes its primary's.
  So a failback (the old primary demoted, resynced and promoted again in the same process,
  its ``run_id`` unchanged) brings back old tokens under a new id, and everything misses. The
  scripts refuse a server that is not a primary (a replica shares its primary's id, and its
  writes would never reach the primary): the call fails and the wrapped saver answers. The
  id also changes, harmlessly (one cold cache), when a primary without a backlog gets its
  first replica and when it frees its backlog (``repl-backlog-ttl`` after its last replica).
- A writer marks the thread *pending* (with a lease) and drops its token before writing to the
  wrapped saver, and drops it again (clearing the mark) after; the next read makes a fresh
  random token, which no worker holds a snapshot under. While a mark is pending nothing
  is served or filled for that thread, so a write whose second step never reached Redis leaves
  the thread uncached until the lease runs out, never stale.
- A fill is a compare-and-set on the token read *before* the wrapped saver was read.

Scripts read the replication id with ``INFO replication`` (as cheap as ``INFO server``, the
``run_id`` the tokens carried before: a ``run_id`` survives a failback) so no client-side state
can be out of date, whatever the connection saw. Keys of the wrong type (planted, or left by
another program) are deleted.
"""

from __future__ import annotations

__all__ = ["BEGIN_WRITE", "END_WRITE", "FILL", "READ", "REPAIR"]

# The replication id every token is made under; refuses a server that is not a primary.
_SERVER = """
local info = redis.call('INFO', 'replication')
local replid = string.match(info, 'master_replid:(%x+)')
if not replid then
  return redis.error_reply('INFO replication has no master_replid: the checkpoint cache needs '
    .. 'Redis 4.0.2 or later (or a server that reports it)')
end
if not string.find(info, 'role:master', 1, true) then
  return redis.error_reply('this Redis server is a replica: the checkpoint cache needs the '
    .. 'primary (redis_url)')
end
"""

_PRELUDE = (
    _SERVER
    + """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local function ensure_type(key, kind)
  local found = redis.call('TYPE', key)['ok']
  if found ~= 'none' and found ~= kind then redis.call('DEL', key) end
end
local function current(token)
  -- The whole token, not its start: bytes planted after a valid replication id are never served.
  return token and string.match(token, '^' .. replid .. ':%x+$') ~= nil
end
local function pending(key)
  ensure_type(key, 'zset')
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  return redis.call('ZCARD', key) > 0
end
ensure_type(KEYS[1], 'string')
ensure_type(KEYS[2], 'hash')
"""
)

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
  epoch = replid .. ':' .. ARGV[1]
  redis.call('SET', KEYS[1], epoch, 'PX', ARGV[3])
end
local version = redis.call('HGET', KEYS[2], 'v')
if not current(version) then
  version = replid .. ':' .. ARGV[2]
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

# KEYS: epoch. After an outage whatever was cached before is stale: drop the epoch (on the
# primary: a repair that reached a replica must not close the breaker).
REPAIR = (
    _SERVER
    + """
redis.call('DEL', KEYS[1])
return 1
"""
)
