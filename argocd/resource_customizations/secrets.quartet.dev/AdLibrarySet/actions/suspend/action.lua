-- Stop every call Quartet makes for this resource (spec.suspend).
obj.spec.suspend = true
return obj
