-- Resume the paused deployment (spec.paused).
obj.spec.paused = false
return obj
