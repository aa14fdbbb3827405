-- Node's benchmark/http/end-string.js, for wrk:
--   wrk -s wrk_scripts/end-string.lua http://127.0.0.1:3000 -- [len=1024] [kind=ascii]
-- requests /end-string/{len}?kind={kind} (kind: ascii, latin1 or twobyte).
--
-- No response() function: defining one makes wrk parse every response in
-- Lua, which would make wrk, not the server, the bottleneck. done() prints
-- one JSON line after wrk's own report; latencies are in microseconds.

local kinds = { ascii = true, latin1 = true, twobyte = true }
local req

local function fail(msg)
  io.stderr:write("end-string.lua: " .. msg .. "\n")
  io.stderr:write("usage: wrk -s wrk_scripts/end-string.lua URL -- [len=1024] [kind=ascii|latin1|twobyte]\n")
  os.exit(2)
end

function init(args)
  if #args > 2 then
    fail("expected at most two arguments, got " .. #args)
  end
  local len = args[1] or "1024"
  local kind = args[2] or "ascii"
  if not string.match(len, "^%d+$") then
    fail("len must be a non-negative integer, got '" .. len .. "'")
  end
  if not kinds[kind] then
    fail("kind must be ascii, latin1 or twobyte, got '" .. kind .. "'")
  end
  req = wrk.format("GET", "/end-string/" .. len .. "?kind=" .. kind)
end

function request()
  return req
end

function done(summary, latency, requests)
  local e = summary.errors
  local secs = summary.duration / 1e6
  io.write(string.format(
    '{"requests":%d,"duration_s":%.6f,"req_per_s":%.2f,"bytes":%d,' ..
    '"latency_us":{"mean":%.2f,"p50":%d,"p99":%d,"p999":%d,"max":%d},' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"timeout":%d,"status":%d}}\n',
    summary.requests, secs, summary.requests / secs, summary.bytes,
    latency.mean, latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max,
    e.connect, e.read, e.write, e.timeout, e.status))
end
