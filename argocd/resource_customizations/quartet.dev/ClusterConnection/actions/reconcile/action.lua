-- Ask Quartet for a pass now (outside the resync budget); the value comes back in
-- status.lastHandledReconcileAt once handled.
if obj.metadata.annotations == nil then
  obj.metadata.annotations = {}
end
obj.metadata.annotations["reconcile.quartet.dev/requestedAt"] = os.date("!%Y-%m-%dT%H:%M:%SZ")
return obj
