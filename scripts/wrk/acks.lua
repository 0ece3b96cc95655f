-- Shared by the wrk scripts (loaded with dofile): each thread's id, and the number of 2xx
-- replies over all threads, printed at the end: each one is a write the server says it
-- committed.
local threads = {}
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end
function response(status, headers, body)
  if status >= 200 and status < 300 then acked = (acked or 0) + 1 end
end
function done(summary, latency, requests)
  local total = 0
  for _, t in ipairs(threads) do total = total + (t:get("acked") or 0) end
  io.write(string.format("acknowledged (2xx): %d of %d requests\n", total, summary.requests))
end
