-- Recursive Fibonacci: function calls, integer arithmetic, comparisons.
-- Written for the andes real-program benchmark suite.
local n = tonumber(arg and arg[1]) or 32

local function fib(k)
  if k < 2 then return k end
  return fib(k - 1) + fib(k - 2)
end

local total = 0
for k = n - 4, n do
  local f = fib(k)
  total = total + f
  print(string.format("fib(%d) = %d", k, f))
end
print(string.format("sum = %d", total))
