-- Rotate the account's password once (a new spec.rotateRequest value).
obj.spec.rotateRequest = os.date("!%Y-%m-%dT%H:%M:%SZ")
return obj
