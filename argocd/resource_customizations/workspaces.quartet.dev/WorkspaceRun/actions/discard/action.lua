-- Discard the run (spec.discard).
obj.spec.discard = true
return obj
