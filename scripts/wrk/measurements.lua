-- wrk: POST one external measurement per request to study STUDY, each a distinct configuration
-- of the integer parameter x (thread t of T posts x = t, t + T, t + 2T, ...).
--   wrk -t2 -c64 -d10s -s scripts/wrk/measurements.lua URL -- TOKEN STUDY [THREADS]
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
  study = args[2]
  next_x = tid
end
function request()
  local x = next_x
  next_x = next_x + step
  local body = '{"measurements": [{"config": {"x": ' .. x .. '}, "value": ' .. (1 + x % 97) .. '}]}'
  return wrk.format("POST", "/v1/studies/" .. study .. "/measurements",
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
