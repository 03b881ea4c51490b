-- Let the Connection check its service again; it checks at once (spec.suspend).
obj.spec.suspend = false
return obj
