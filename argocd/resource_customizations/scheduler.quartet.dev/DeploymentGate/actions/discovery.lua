-- The actions Argo CD offers on this resource, and whether each applies now.
local suspended = obj.spec ~= nil and obj.spec.suspend == true
actions = {}
actions["reconcile"] = {["disabled"] = false}
actions["suspend"] = {["disabled"] = suspended}
actions["unsuspend"] = {["disabled"] = not suspended}
actions["promote"] = {["disabled"] = obj.spec.promote ~= nil and obj.spec.promote.policy ~= "Manual"}
actions["pause"] = {["disabled"] = obj.spec.paused == true}
actions["resume"] = {["disabled"] = obj.spec.paused ~= true}
actions["unblock"] = {["disabled"] = false}
local deployment = obj.status ~= nil and obj.status.deploymentStatus or nil
actions["fail"] = {["disabled"] = deployment ~= "running" and deployment ~= "paused" and deployment ~= "blocked"}
return actions
