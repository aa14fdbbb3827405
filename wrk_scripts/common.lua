-- What both end-string scripts share, loaded with dofile from the file
-- beside them:
--   local common = dofile(here .. "common.lua")
-- common.path(name, usage, len, kind, body) checks the end-string
-- arguments (exit status 2 and a usage line on a bad one) and returns the
-- request path; common.done is wrk's done(): one JSON line after wrk's own
-- report, with the request count, the duration, req/s, bytes, latencies in
-- microseconds and the error counts.

local common = {}

local kinds = { ascii = true, latin1 = true, twobyte = true }
local bodies = { flat = "", rope = "&body=rope" }

-- Prints `msg` and the script's usage, and exits with status 2.
function common.fail(name, usage, msg)
  io.stderr:write(name .. ": " .. msg .. "\n")
  io.stderr:write("usage: " .. usage .. "\n")
  os.exit(2)
end

-- /end-string/{len}?kind={kind}, and &body=rope for body=rope.
function common.path(name, usage, len, kind, body)
  len, kind, body = len or "1024", kind or "ascii", body or "flat"
  if not string.match(len, "^%d+$") then
    common.fail(name, usage, "len must be a non-negative integer, got '" .. len .. "'")
  end
  if not kinds[kind] then
    common.fail(name, usage, "kind must be ascii, latin1 or twobyte, got '" .. kind .. "'")
  end
  if not bodies[body] then
    common.fail(name, usage, "body must be flat or rope, got '" .. body .. "'")
  end
  return "/end-string/" .. len .. "?kind=" .. kind .. bodies[body]
end

function common.done(summary, latency, requests)
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

return common
