{{/*
The namespaces the operator watches: watchNamespaces, plus watchNamespace (the one-item form
kept for compatibility), without repeats. Empty: all namespaces.
*/}}
{{- define "quartet.watchNamespaces" -}}
{{- $list := list -}}
{{- range .Values.watchNamespaces }}{{ $list = append $list . }}{{ end -}}
{{- with .Values.watchNamespace }}{{ $list = append $list . }}{{ end -}}
{{- $list | uniq | toJson -}}
{{- end -}}

{{/*
Rules over namespaced objects: in the ClusterRole when all namespaces are watched, else in a
Role in each watched namespace.
*/}}
{{- define "quartet.namespacedRules" }}
  # Managed kinds: watched by the controllers; patched to add and remove the finalizer.
  - apiGroups: ["secrets.quartet.dev"]
    resources: ["secretspolicies", "drreplications"]
    verbs: ["list", "watch", "patch"]
  - apiGroups: ["secrets.quartet.dev"]
    resources: ["secretspolicies/status", "drreplications/status"]
    verbs: ["patch"]
  - apiGroups: ["catalog.quartet.dev"]
    resources: ["catalogaclbootstraps"]
    verbs: ["list", "watch", "patch"]
  - apiGroups: ["catalog.quartet.dev"]
    resources: ["catalogaclbootstraps/status"]
    verbs: ["patch"]
  - apiGroups: ["catalog.quartet.dev"]
    resources: ["catalogacltokens"]
    verbs: ["list", "watch", "patch"]
  - apiGroups: ["catalog.quartet.dev"]
    resources: ["catalogacltokens/status"]
    verbs: ["patch"]
  - apiGroups: ["scheduler.quartet.dev"]
    resources: ["deploymentgates"]
    verbs: ["list", "watch", "patch"]
  - apiGroups: ["scheduler.quartet.dev"]
    resources: ["deploymentgates/status"]
    verbs: ["patch"]
  # Transform engine kinds.
  - apiGroups: ["secrets.quartet.dev"]
    resources: ["transformroles", "transformations", "transformtemplates", "transformalphabets", "transformstores"]
    verbs: ["list", "watch", "patch"]
  - apiGroups: ["secrets.quartet.dev"]
    resources: ["transformroles/status", "transformations/status", "transformtemplates/status", "transformalphabets/status", "transformstores/status"]
    verbs: ["patch"]
  - apiGroups: ["secrets.quartet.dev"]
    resources: ["totpmethods"]
    verbs: ["list", "watch", "patch"]
  - apiGroups: ["secrets.quartet.dev"]
    resources: ["totpmethods/status"]
    verbs: ["patch"]
  - apiGroups: ["secrets.quartet.dev"]
    resources: ["totpenrollments"]
    verbs: ["list", "watch", "patch"]
  - apiGroups: ["secrets.quartet.dev"]
    resources: ["totpenrollments/status"]
    verbs: ["patch"]
  - apiGroups: ["secrets.quartet.dev"]
    resources: ["idpusers", "idpgroups", "idpauthmethods"]
    verbs: ["list", "watch", "patch"]
  - apiGroups: ["secrets.quartet.dev"]
    resources: ["idpusers/status", "idpgroups/status", "idpauthmethods/status"]
    verbs: ["patch"]
  # A TotpEnrollment reads the TotpMethod it names (methodRef) for its method id.
  - apiGroups: ["secrets.quartet.dev"]
    resources: ["totpmethods"]
    verbs: ["get"]
  # No-code modules and workspaces; a NoCodeWorkspace reads the NoCodeModule it names.
  - apiGroups: ["workspaces.quartet.dev"]
    resources: ["nocodemodules"]
    verbs: ["get", "list", "watch", "patch"]
  - apiGroups: ["workspaces.quartet.dev"]
    resources: ["nocodeworkspaces"]
    verbs: ["list", "watch", "patch"]
  - apiGroups: ["workspaces.quartet.dev"]
    resources: ["nocodemodules/status", "nocodeworkspaces/status"]
    verbs: ["patch"]
  - apiGroups: ["workspaces.quartet.dev"]
    resources: ["workspaces", "workspaceruns"]
    verbs: ["list", "watch", "patch"]
  - apiGroups: ["workspaces.quartet.dev"]
    resources: ["workspaces/status", "workspaceruns/status"]
    verbs: ["patch"]
  # A WorkspaceRun reads the Workspace it names.
  - apiGroups: ["workspaces.quartet.dev"]
    resources: ["workspaces"]
    verbs: ["get"]
  # Directory engine kinds (AdEngine, AdRole, AdLibrarySet, AdCheckout).
  - apiGroups: ["secrets.quartet.dev"]
    resources: ["adengines", "adroles", "adlibrarysets", "adcheckouts"]
    verbs: ["list", "watch", "patch"]
  - apiGroups: ["secrets.quartet.dev"]
    resources: ["adengines/status", "adroles/status", "adlibrarysets/status", "adcheckouts/status"]
    verbs: ["patch"]
  # An AdCheckout reads the AdLibrarySet it names.
  - apiGroups: ["secrets.quartet.dev"]
    resources: ["adlibrarysets"]
    verbs: ["get"]
  # Connections: read (watched) and their status written.
  - apiGroups: ["quartet.dev"]
    resources: ["connections"]
    verbs: ["list", "watch"]
  - apiGroups: ["quartet.dev"]
    resources: ["connections/status"]
    verbs: ["patch"]
  # Short-lived ServiceAccount tokens for CatalogAclToken's serviceAccountName (TokenRequest).
  - apiGroups: [""]
    resources: ["serviceaccounts/token"]
    verbs: ["create"]
  # Secrets: read by name (Connection tokens and CAs, passwords and keys a resource names) and
  # watched so a changed one is applied at once.
  - apiGroups: [""]
    resources: ["secrets"]
    verbs: ["get", "list", "watch"]
  # Secrets written by server-side apply: results owned by a resource (TotpEnrollment's QR code,
  # AdRole and AdCheckout credentials, CatalogAclToken's token, a DR ceremony's one-time
  # passwords) or kept for the cluster (CatalogAclBootstrap's management token). An apply that
  # makes a Secret that does not exist yet is authorized as `create` as well as `patch`; `create`
  # also covers the operator's hash-key Secret, made once in its own namespace.
  - apiGroups: [""]
    resources: ["secrets"]
    verbs: ["create", "patch"]
  # Events on the resources: recorded (create), and a repeated one counted in its series (patch).
  - apiGroups: ["events.k8s.io"]
    resources: ["events"]
    verbs: ["create", "patch"]
{{- end }}

{{/*
Rules over cluster-scoped objects: always in the ClusterRole. No Secret, and no managed kind.
*/}}
{{- define "quartet.clusterRules" }}
  # ClusterConnections: read (watched) and their status written. Cluster-scoped, so a
  # ClusterRole in every mode.
  - apiGroups: ["quartet.dev"]
    resources: ["clusterconnections"]
    verbs: ["list", "watch"]
  - apiGroups: ["quartet.dev"]
    resources: ["clusterconnections/status"]
    verbs: ["patch"]
  # Namespaces: read by name (whether one is terminating, so cleanup does not hold it hostage),
  # and their labels watched for ClusterConnections' namespaceSelector (a namespace labelled
  # later is admitted at once). Only metadata is used; namespaces hold no secret.
  - apiGroups: [""]
    resources: ["namespaces"]
    verbs: ["get", "list", "watch"]
  # Which kinds the cluster serves: the CRDs are read (never written) so a missing one is
  # reported and its controller starts when it is installed. The watch is of their metadata
  # only; Quartet's own CRDs are then read by name (get). Without this rule the operator falls
  # back to API discovery every 10 s.
  - apiGroups: ["apiextensions.k8s.io"]
    resources: ["customresourcedefinitions"]
    verbs: ["get", "list", "watch"]
{{- end -}}
