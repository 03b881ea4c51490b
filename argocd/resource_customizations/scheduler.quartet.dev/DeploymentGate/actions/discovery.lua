-- The actions Argo CD offers on this resource, and whether each applies now.
local suspended = obj.spec ~= nil and obj.spec.suspend == true
actions = {}
actions["reconcile"] = {["disabled"] = false}
actions["suspend"] = {["disabled"] = suspended}
actions["unsuspend"] = {["disabled"] = not suspended}
actions["promote"] = {["disabled"] = obj.spec.promote ~= nil and obj.spec.promote.policy ~= "Manual"}
local deployment = obj.status ~= nil and obj.status.deploymentStatus or nil
-- Pausing is for a deployment under way; unblocking, for one blocked on its peer regions (a
-- request on any other is never handled, and a paused finished deployment would show as
-- Suspended for nothing).
actions["pause"] = {["disabled"] = obj.spec.paused == true or (deployment ~= "running" and deployment ~= "pending" and deployment ~= "initializing")}
actions["resume"] = {["disabled"] = obj.spec.paused ~= true}
actions["unblock"] = {["disabled"] = deployment ~= "blocked"}
actions["fail"] = {["disabled"] = deployment ~= "running" and deployment ~= "paused" and deployment ~= "blocked"}
return actions
