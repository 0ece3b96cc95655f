-- wrk: POST the result of leased trials FIRST, FIRST+1, ... (each once: thread t of T posts
-- FIRST + t, FIRST + t + T, ...). The trials must be leased to client "wrk".
--   wrk -t2 -c64 -d10s -s scripts/wrk/results.lua URL -- TOKEN FIRST [THREADS]
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "acks.lua")
function init(args)
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
