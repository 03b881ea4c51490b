-- Pause the active deployment (spec.paused).
obj.spec.paused = true
return obj
