-- Let Quartet reconcile this resource again; it catches up at once (spec.suspend).
obj.spec.suspend = false
return obj
