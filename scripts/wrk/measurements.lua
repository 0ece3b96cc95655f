-- wrk: POST one external measurement per request to study STUDY, each a distinct configuration
-- of the integer parameter x (thread t of T posts x = t, t + T, t + 2T, ...).
--   wrk -t2 -c64 -d10s -s scripts/wrk/measurements.lua URL -- TOKEN STUDY [THREADS]
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "acks.lua")
function init(args)
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
