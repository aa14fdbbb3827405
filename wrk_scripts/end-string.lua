-- Node's benchmark/http/end-string.js, for wrk:
--   wrk -s wrk_scripts/end-string.lua http://127.0.0.1:3000 -- [len=1024] [kind=ascii] [body=flat]
-- requests /end-string/{len}?kind={kind} (kind: ascii, latin1 or twobyte);
-- body=rope adds &body=rope, which makes the server keep the ascii body as
-- a ropey rope; body=flat (the default) sends no body parameter.
--
-- Static: init() sets wrk.path and no request() is defined, so wrk formats
-- the request once and never calls into Lua per request (request() would
-- cost wrk CPU on every request, CPU the server then does not get). No
-- response() either: defining one makes wrk parse every response in Lua.
-- done() prints one JSON line after wrk's own report; latencies are in
-- microseconds.

local kinds = { ascii = true, latin1 = true, twobyte = true }
local bodies = { flat = "", rope = "&body=rope" }

local function fail(msg)
  io.stderr:write("end-string.lua: " .. msg .. "\n")
  io.stderr:write("usage: wrk -s wrk_scripts/end-string.lua URL -- [len=1024] [kind=ascii|latin1|twobyte] [body=flat|rope]\n")
  os.exit(2)
end

function init(args)
  if #args > 3 then
    fail("expected at most three arguments, got " .. #args)
  end
  local len = args[1] or "1024"
  local kind = args[2] or "ascii"
  local body = args[3] or "flat"
  if not string.match(len, "^%d+$") then
    fail("len must be a non-negative integer, got '" .. len .. "'")
  end
  if not kinds[kind] then
    fail("kind must be ascii, latin1 or twobyte, got '" .. kind .. "'")
  end
  if not bodies[body] then
    fail("body must be flat or rope, got '" .. body .. "'")
  end
  wrk.path = "/end-string/" .. len .. "?kind=" .. kind .. bodies[body]
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
