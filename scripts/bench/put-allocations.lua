-- wrk: PUT /allocations/{consumer} with a fresh consumer uuid per request
-- consumer_generation null and consumer_type INSTANCE (microversion 1.39), one VCPU and
-- 16 MB of MEMORY_MB on a provider from $BENCH_PROVIDERS (round robin).
local providers = {}
for u in string.gmatch(os.getenv("BENCH_PROVIDERS") or "", "[^,]+") do
  providers[#providers + 1] = u
end
local threads = {}
-- tid is a global: setup() sets it in each thread's Lua state.
local counter, nonce = 0, 0

setup = function(thread)
  thread:set("tid", #threads + 1)
  threads[#threads + 1] = thread
end

init = function(args)
  -- Unique per thread and per run: thread id, a random nonce, a counter.
  local f = io.open("/dev/urandom", "rb")
  local b = f:read(4)
  f:close()
  nonce = ((b:byte(1) * 256 + b:byte(2)) * 256 + b:byte(3)) * 128 + (b:byte(4) % 128)
  tid = tid or 0
end

wrk.method = "PUT"
wrk.headers["X-Auth-Token"] = "admin"
wrk.headers["OpenStack-API-Version"] = "placement 1.39"
wrk.headers["Content-Type"] = "application/json"

request = function()
  counter = counter + 1
  local consumer = string.format("%08x-%04x-4000-8000-%012d", nonce, tid, counter)
  local rp = providers[(counter % #providers) + 1]
  local body = '{"allocations": {"' .. rp .. '": {"resources": {"VCPU": 1, "MEMORY_MB": 16}}}, '
    .. '"project_id": "bench-project", "user_id": "bench-user", "consumer_generation": null, "consumer_type": "INSTANCE"}'
  return wrk.format(nil, "/allocations/" .. consumer, nil, body)
end

response = function(status, headers, body)
  if status ~= 204 and not reported then
    reported = true
    io.stderr:write("put-allocations: first non-204 answer: " .. status .. " " .. body .. "\n")
  end
end

done = function(summary, latency, requests)
  io.write(string.format("wrk-summary requests=%d non2xx=%d errors_connect=%d errors_read=%d errors_write=%d errors_timeout=%d\n",
    summary.requests, summary.errors.status, summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.timeout))
end
