-- Stop every call Quartet makes for this gate (spec.suspend).
obj.spec.suspend = true
return obj
