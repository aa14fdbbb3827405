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

local here = debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./"
local common = dofile(here .. "common.lua")
local usage = "wrk -s wrk_scripts/end-string.lua URL -- [len=1024] [kind=ascii|latin1|twobyte] [body=flat|rope]"

function init(args)
  if #args > 3 then
    common.fail("end-string.lua", usage, "expected at most three arguments, got " .. #args)
  end
  wrk.path = common.path("end-string.lua", usage, args[1], args[2], args[3])
end

done = common.done
