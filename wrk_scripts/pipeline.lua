-- Node's end-string, pipelined in TechEmpower's plaintext shape:
--   wrk -s wrk_scripts/pipeline.lua http://127.0.0.1:3000 -- [depth=16] [len=1024] [kind=ascii] [body=flat]
-- sends `depth` requests for /end-string/{len}?kind={kind} in one write and
-- waits for their responses before the next batch, as TechEmpower's
-- pipeline.lua does (wrk counts each response). kind and body as in
-- end-string.lua.
--
-- The batch is built once, in init(); request() hands wrk the same string
-- for every batch. done() prints end-string.lua's JSON line.

local here = debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./"
local common = dofile(here .. "common.lua")
local usage = "wrk -s wrk_scripts/pipeline.lua URL -- [depth=16] [len=1024] [kind=ascii|latin1|twobyte] [body=flat|rope]"

local batch

function init(args)
  if #args > 4 then
    common.fail("pipeline.lua", usage, "expected at most four arguments, got " .. #args)
  end
  local depth = args[1] or "16"
  if not string.match(depth, "^%d+$") or tonumber(depth) < 1 then
    common.fail("pipeline.lua", usage, "depth must be a positive integer, got '" .. depth .. "'")
  end
  local path = common.path("pipeline.lua", usage, args[2], args[3], args[4])
  batch = string.rep(wrk.format("GET", path), tonumber(depth))
end

function request()
  return batch
end

done = common.done
