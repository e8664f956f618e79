-- A job with a large, mostly quiet memory: builds a table of integers that
-- fills MIB MiB (16 bytes an entry), prints "built", then round after round
-- changes one entry in every STEP-th 64 KiB page of it (PCT % of its pages:
-- STEP = 100 / PCT), with a little arithmetic between rounds. Runs until it
-- is stopped. Written for the andes incremental-checkpoint benchmark.
local mib = tonumber(arg and arg[1]) or 64
local pct = tonumber(arg and arg[2]) or 1
local n = mib * 65536
local t = {}
for i = 1, n do t[i] = i end
print("built " .. n)
io.stdout:flush()
local per = 4096 -- entries in a 64 KiB page
local stride = per * math.max(1, math.floor(100 / pct + 0.5))
local round = 0
while true do
  round = round + 1
  for i = 1, n, stride do t[i] = t[i] + 1 end
  local s = 0
  for k = 1, 100000 do s = s + k end
end
