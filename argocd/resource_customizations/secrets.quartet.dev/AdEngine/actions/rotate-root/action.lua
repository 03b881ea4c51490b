-- Rotate the bind password once (a new spec.rotateRootRequest value).
obj.spec.rotateRootRequest = os.date("!%Y-%m-%dT%H:%M:%SZ")
return obj
