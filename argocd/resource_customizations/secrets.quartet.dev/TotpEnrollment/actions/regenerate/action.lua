-- Replace the entity's TOTP secret once (a new spec.regenerate value).
obj.spec.regenerate = os.date("!%Y-%m-%dT%H:%M:%SZ")
return obj
