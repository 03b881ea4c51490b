-- Unblock the job's multiregion deployment once (a new spec.unblockRequest value).
obj.spec.unblockRequest = os.date("!%Y-%m-%dT%H:%M:%SZ")
return obj
