-- The actions Argo CD offers on this resource, and whether each applies now.
local suspended = obj.spec ~= nil and obj.spec.suspend == true
actions = {}
actions["reconcile"] = {["disabled"] = false}
actions["suspend"] = {["disabled"] = suspended}
actions["resume"] = {["disabled"] = not suspended}
actions["confirm"] = {["disabled"] = obj.status == nil or obj.status.actions == nil or obj.status.actions["is-confirmable"] ~= true or obj.spec.confirm == true}
actions["discard"] = {["disabled"] = obj.status == nil or obj.status.actions == nil or obj.status.actions["is-discardable"] ~= true or obj.spec.discard == true}
actions["cancel"] = {["disabled"] = obj.status == nil or obj.status.actions == nil or obj.status.actions["is-cancelable"] ~= true or obj.spec.cancel == true}
return actions
