-- Confirm (apply) the run once it is confirmable (spec.confirm).
obj.spec.confirm = true
return obj
