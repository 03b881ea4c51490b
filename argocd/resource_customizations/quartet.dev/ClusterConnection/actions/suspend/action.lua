-- Stop the Connection's own checks of its service (spec.suspend); the resources that use it
-- go on: suspend them to stop their calls.
obj.spec.suspend = true
return obj
