-- Health of a Quartet resource, from its status contract (README "GitOps"): Ready, the kstatus
-- pair Reconciling/Stalled, observedGeneration and spec.suspend.
local hs = {}

local function condition(type)
  if obj.status ~= nil and obj.status.conditions ~= nil then
    for _, c in ipairs(obj.status.conditions) do
      if c.type == type then
        return c
      end
    end
  end
  return nil
end

local function describe(c, fallback)
  if c == nil then
    return fallback
  end
  if c.message ~= nil and c.message ~= "" then
    return c.reason .. ": " .. c.message
  end
  return c.reason
end

local generation = obj.metadata.generation
if obj.status == nil or obj.status.observedGeneration == nil or
    (generation ~= nil and obj.status.observedGeneration < generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for Quartet to observe generation " .. tostring(generation)
  return hs
end

local ready = condition("Ready")
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(ready, "Ready")
  return hs
end
if ready ~= nil and ready.status == "False" then
  hs.status = "Degraded"
  hs.message = describe(ready, "Not ready")
  return hs
end
hs.status = "Progressing"
hs.message = "Waiting for Quartet"
return hs
