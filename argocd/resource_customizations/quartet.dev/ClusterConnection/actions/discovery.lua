-- The actions Argo CD offers on this resource, and whether each applies now.
local suspended = obj.spec ~= nil and obj.spec.suspend == true
actions = {}
actions["reconcile"] = {["disabled"] = false}
actions["suspend"] = {["disabled"] = suspended}
actions["resume"] = {["disabled"] = not suspended}
return actions
