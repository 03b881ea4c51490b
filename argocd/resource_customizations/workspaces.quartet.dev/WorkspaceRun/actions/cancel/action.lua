-- Cancel the run (spec.cancel).
obj.spec.cancel = true
return obj
