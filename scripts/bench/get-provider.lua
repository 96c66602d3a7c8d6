-- wrk: GET /resource_providers/{uuid}, cycling over the providers in
-- $BENCH_PROVIDERS (comma-separated uuids).
local providers = {}
for u in string.gmatch(os.getenv("BENCH_PROVIDERS") or "", "[^,]+") do
  providers[#providers + 1] = u
end
local i = 0
wrk.method = "GET"
wrk.headers["X-Auth-Token"] = "admin"
wrk.headers["OpenStack-API-Version"] = "placement 1.39"
wrk.headers["Accept"] = "application/json"

request = function()
  i = i + 1
  return wrk.format(nil, "/resource_providers/" .. providers[(i % #providers) + 1])
end
