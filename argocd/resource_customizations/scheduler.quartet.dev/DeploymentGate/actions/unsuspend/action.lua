-- Let Quartet call the scheduler for this gate again (spec.suspend).
obj.spec.suspend = false
return obj
