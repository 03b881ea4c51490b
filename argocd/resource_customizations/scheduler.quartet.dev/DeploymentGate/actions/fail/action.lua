-- Fail the job's active deployment now (a new spec.failRequest); the scheduler rolls back by its
-- rule, and the gate records the value in status.handledFailRequest.
obj.spec.failRequest = os.date("!%Y-%m-%dT%H:%M:%SZ")
return obj
