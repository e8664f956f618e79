-- A job with a large, mostly quiet memory: builds a table of integers that
-- fills about MIB MiB (16 bytes an entry) as rows of a little less than a
-- 64 KiB page each (each row made at its full size, so the memory holds the
-- table and little else; a row of a whole page would, with the allocator's
-- header, take two pages of a wasm memory, which grows by whole pages),
-- prints "built", then round after round changes SPREAD entries (default 1,
-- evenly spaced: 32 reach every 4 KiB page of a row) in every STEP-th row
-- (PCT % of its 64 KiB pages: STEP = 100 / PCT), with a little arithmetic
-- between rounds. Runs until it is stopped, or, given ROUNDS, ends after that
-- many rounds printing the table's sum (so that a run killed and resumed can
-- be checked against one that was not). Written for the andes
-- incremental-checkpoint benchmark and its kill-and-resume check.
-- Nothing here is garbage: the collector stays off. (In a 32-bit Lua, a wasm32
-- one, its debt counters saturate past 2 GiB of heap and it would collect
-- without end, each step walking the whole table.)
collectgarbage("stop")
local mib = tonumber(arg and arg[1]) or 64
local pct = tonumber(arg and arg[2]) or 1
local spread = math.max(1, math.floor(tonumber(arg and arg[3]) or 1))
local rounds = tonumber(arg and arg[4])
local per = 4064 -- entries in a row: 63.5 KiB, and room for the row's header
local rows = mib * 16
-- A constructor of `per` entries allocates the row's array once, whole.
local row_of = load("local b = ... return {" .. string.rep("b,", per) .. "}")
local t = {}
for r = 1, rows do
  local row = row_of(0)
  local base = (r - 1) * per
  for i = 1, per do row[i] = base + i end
  t[r] = row
end
print("built " .. rows * per)
io.stdout:flush()
local step = math.max(1, math.floor(100 / pct + 0.5))
local gap = math.max(1, math.floor(per / spread))
local round = 0
while not rounds or round < rounds do
  round = round + 1
  for r = 1, rows, step do
    local row = t[r]
    for j = 0, spread - 1 do
      local i = 1 + j * gap
      row[i] = row[i] + 1
    end
  end
  local s = 0
  for k = 1, 100000 do s = s + k end
end
local sum = 0
for r = 1, rows do
  local row = t[r]
  for i = 1, per do sum = sum + row[i] end
end
print("rounds " .. round .. " sum " .. sum)
