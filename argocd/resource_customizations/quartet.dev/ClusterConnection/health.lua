-- Health of a Quartet resource, from its status contract (docs/status-reasons.md): Ready, the
-- kstatus pair Reconciling/Stalled, observedGeneration and spec.suspend. One script for every
-- kind: argocd/health.lua is the source, each resource_customizations/<group>/<Kind>/health.lua
-- a copy of it (tests/argocd.rs keeps them the same).
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

if obj.spec ~= nil and obj.spec.suspend == true then
  hs.status = "Suspended"
  hs.message = "Reconciliation is suspended (spec.suspend)"
  return hs
end

local generation = obj.metadata.generation
if obj.status == nil or obj.status.observedGeneration == nil or
    (generation ~= nil and obj.status.observedGeneration < generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for Quartet to observe generation " .. tostring(generation)
  return hs
end

-- A paused deployment waits for a person, as Argo CD shows a paused rollout.
if obj.kind == "DeploymentGate" and obj.spec ~= nil and obj.spec.paused == true then
  hs.status = "Suspended"
  hs.message = "The deployment is paused (spec.paused)"
  return hs
end

local ready = condition("Ready")
-- A run waiting for its confirmation waits for a person too.
if obj.kind == "WorkspaceRun" and (ready == nil or ready.status ~= "True") and
    obj.status.actions ~= nil and obj.status.actions["is-confirmable"] == true and
    obj.spec.confirm ~= true and obj.spec.discard ~= true and obj.spec.cancel ~= true then
  hs.status = "Suspended"
  hs.message = "The run " .. tostring(obj.status.runId) .. " waits for confirmation (action confirm, or discard)"
  return hs
end
local stalled = condition("Stalled")
local reconciling = condition("Reconciling")
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = describe(stalled, "Stalled")
  return hs
end
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(ready, "Ready")
  return hs
end
if ready ~= nil and ready.reason == "Suspended" then
  hs.status = "Suspended"
  hs.message = describe(ready, "Suspended")
  return hs
end
if reconciling ~= nil and reconciling.status == "True" then
  hs.status = "Progressing"
  hs.message = describe(reconciling, "Reconciling")
  return hs
end
hs.status = "Progressing"
hs.message = describe(ready, "Waiting for Quartet")
return hs
