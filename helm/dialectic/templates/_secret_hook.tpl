{{- /*
A pre-install/pre-upgrade hook that creates a Secret once, when (and only when)
it does not exist yet: a ServiceAccount, a Role, its RoleBinding, and a Job
running the chart's own image, `dialecticd secret-hook KIND`. dialecticd draws
the values in its own memory and POSTs the Secret to the Kubernetes API itself:
no value is on any command line (/proc/PID/cmdline) and no other image sees one.
An existing Secret is never read or replaced: the API answers 409 Conflict and
the Job succeeds. The Secret it creates is no release resource: it outlives
`helm uninstall`, and it carries no app.kubernetes.io/instance label, so Argo CD
(label tracking) never prunes it. Nothing here is random at render time.

The ServiceAccount, Role and RoleBinding carry hook-failed as well as
hook-succeeded: a failed run leaves no grant behind. The Job keeps its pods
after a failure, so `kubectl logs job/<name>` says why (it holds no key, and its
token expires with the 600 s projection); before-hook-creation removes it at the
next install or upgrade.

Used by internal-secret.yaml (the shared token secret) and service-keys.yaml
(one Ed25519 key pair per service). Parameters (a dict):

  root        the chart's root context
  component   the Job's name suffix, component label and the `secret-hook`
              kind (internal-secret, service-keys)
  secretName  the Secret to create
*/}}
{{- define "dialectic.secretHook" -}}
{{- $root := .root }}
{{- $job := printf "%s-%s" (include "dialectic.fullname" $root) .component }}
{{- $hook := dict "helm.sh/hook" "pre-install,pre-upgrade" "helm.sh/hook-delete-policy" "before-hook-creation,hook-succeeded,hook-failed" }}
{{- $jobHook := dict "helm.sh/hook" "pre-install,pre-upgrade" "helm.sh/hook-delete-policy" "before-hook-creation,hook-succeeded" }}
{{- $gen := $root.Values.internal.generator }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $job }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "dialectic.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
  annotations:
    {{- with $root.Values.commonAnnotations }}{{ toYaml . | nindent 4 }}{{ end }}
    {{- toYaml $hook | nindent 4 }}
    "helm.sh/hook-weight": "-30"
automountServiceAccountToken: false
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $job }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "dialectic.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
  annotations:
    {{- with $root.Values.commonAnnotations }}{{ toYaml . | nindent 4 }}{{ end }}
    {{- toYaml $hook | nindent 4 }}
    "helm.sh/hook-weight": "-30"
# create only: the hook never reads, patches or replaces a Secret. Kubernetes RBAC
# cannot narrow `create` with resourceNames (the name is not known when the
# request is authorized), so this rule cannot name the one Secret; the grant
# lives only while the hook runs (its token is projected for this Job, 600 s)
# and is used by the chart's own binary alone.
rules:
  - apiGroups: [""]
    resources: ["secrets"]
    verbs: ["create"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $job }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "dialectic.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
  annotations:
    {{- with $root.Values.commonAnnotations }}{{ toYaml . | nindent 4 }}{{ end }}
    {{- toYaml $hook | nindent 4 }}
    "helm.sh/hook-weight": "-30"
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $job }}
subjects:
  - kind: ServiceAccount
    name: {{ $job }}
    namespace: {{ $root.Release.Namespace }}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ $job }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "dialectic.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
  annotations:
    {{- with $root.Values.commonAnnotations }}{{ toYaml . | nindent 4 }}{{ end }}
    {{- toYaml $jobHook | nindent 4 }}
    "helm.sh/hook-weight": "-20"
spec:
  backoffLimit: 3
  activeDeadlineSeconds: 300
  template:
    metadata:
      labels:
        {{- include "dialectic.selectorLabels" $root | nindent 8 }}
        app.kubernetes.io/component: {{ .component }}
      {{- with $gen.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      restartPolicy: Never
      serviceAccountName: {{ $job }}
      # The API token is mounted explicitly below (short-lived, this Job only).
      automountServiceAccountToken: false
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with merge (deepCopy ($gen.nodeSelector | default dict)) ($root.Values.nodeSelector | default dict) }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $gen.tolerations | default $root.Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: create
          image: {{ include "dialectic.image" $root | quote }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          # Names only: the values are drawn inside dialecticd and sent in the request body.
          args: ["secret-hook", {{ .component | quote }}]
          env:
            - name: SECRET_NAME
              value: {{ .secretName | quote }}
            - name: CHART_NAME
              value: {{ include "dialectic.name" $root | quote }}
            - name: RELEASE_NAME
              value: {{ $root.Release.Name | quote }}
            - name: NAMESPACE
              value: {{ $root.Release.Namespace | quote }}
          securityContext:
            {{- toYaml $root.Values.containerSecurityContext | nindent 12 }}
          resources:
            {{- toYaml $gen.resources | nindent 12 }}
          volumeMounts:
            - name: api
              mountPath: /var/run/secrets/kubernetes.io/serviceaccount
              readOnly: true
      volumes:
        - name: api
          projected:
            sources:
              - serviceAccountToken:
                  path: token
                  expirationSeconds: 600
              - configMap:
                  name: kube-root-ca.crt
                  items:
                    - key: ca.crt
                      path: ca.crt
{{- end -}}
