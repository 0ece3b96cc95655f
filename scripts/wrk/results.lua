-- wrk: POST the result of leased trials FIRST, FIRST+1, ... (each once: thread t of T posts
-- FIRST + t, FIRST + t + T, ...). The trials must be leased to client "wrk".
--   wrk -t2 -c64 -d10s -s scripts/wrk/results.lua URL -- TOKEN FIRST [THREADS]
local threads = {}
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end
function init(args)
  acked = 0
  -- The number of wrk threads (-t); 2 unless given after the other arguments.
  step = tonumber(args[3] or "2")
  token = args[1]
  next_id = tonumber(args[2]) + tid
end
function request()
  local id = next_id
  next_id = next_id + step
  local body = '{"client_id": "wrk", "value": ' .. (1 + id % 97) .. ', "raw": [1.0, 1.1]}'
  return wrk.format("POST", "/v1/trials/" .. id .. "/result",
                    {["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json"},
                    body)
end
function response(status, headers, body)
  if status >= 200 and status < 300 then acked = acked + 1 end
end
-- The 2xx replies over all threads: each one is a write the server says it committed.
function done(summary, latency, requests)
  local total = 0
  for _, t in ipairs(threads) do total = total + t:get("acked") end
  io.write(string.format("acknowledged (2xx): %d of %d requests\n", total, summary.requests))
end
