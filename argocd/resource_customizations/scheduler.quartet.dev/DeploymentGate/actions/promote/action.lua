-- Let the gate promote the canaries once healthy (spec.promote.policy: Auto).
if obj.spec.promote == nil then
  obj.spec.promote = {}
end
obj.spec.promote.policy = "Auto"
return obj
